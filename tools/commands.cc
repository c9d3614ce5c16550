#include "tools/commands.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "runtime/cli/worker_flags.h"
#include "tools/choice_flags.h"
#include "tools/guidance_flags.h"
#include "tools/processor_flags.h"
#include "tools/serve_plan.h"

namespace splitspec::tools {
namespace {

constexpr char kDefaultModel[] = "$SPLITSPEC_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kCoordinator[] = "tcp://127.0.0.1:5555";

const cli::FlagTable& Table(cli::FlagTable table) {
  // Tables live as long as the process; callers keep references.
  return *new cli::FlagTable(std::move(table));
}

std::vector<cli::Flag> SamplingFlags() {
  // The ranges are those of SamplingParams' fields (max_tokens uint32, top_k int32); a
  // seed is an int64 >= 0, as OpenAI's is (SamplingParams.seed is a uint64).
  return {{"max-tokens", "N", "128", "tokens to generate at most", cli::IntRangeOf<uint32_t>()},
          {"temperature", "T", "0", "sampling temperature; 0 = greedy"},
          {"top-k", "K", "0", "keep the K most likely tokens; 0 = all", cli::IntRangeOf<int32_t>()},
          {"top-p", "P", "1", "nucleus sampling mass"},
          {"seed", "S", "0", "sampling seed, in [0, 2^63)",
           cli::IntRange{0, std::numeric_limits<int64_t>::max()}},
          {"verify", "MODE", "", "greedy, rejection or coupled verification"}};
}

std::vector<cli::Flag> Concat(std::vector<cli::Flag> a, const std::vector<cli::Flag>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// `table` with the sampling flags (then `extra`) inserted before its flag number `at`.
const cli::FlagTable& TableWithSampling(cli::FlagTable table, size_t at,
                                        const std::vector<cli::Flag>& extra = {}) {
  std::vector<cli::Flag> sampling = SamplingFlags();
  sampling.insert(sampling.end(), extra.begin(), extra.end());
  table.flags.insert(table.flags.begin() + at, sampling.begin(), sampling.end());
  return Table(std::move(table));
}

// `table` (serve's) with the coordinator flags serve passes on appended.
const cli::FlagTable& WithForwardedCoordinatorFlags(cli::FlagTable table) {
  std::vector<cli::Flag> forwarded = ForwardedCoordinatorFlags();
  table.flags.insert(table.flags.end(), forwarded.begin(), forwarded.end());
  return Table(std::move(table));
}

}  // namespace

const cli::FlagTable& StatusFlagTable() {
  static const cli::FlagTable& table = Table(
      {.command = "splitspec status",
       .summary = "print the coordinator's membership table as one JSON object",
       .flags = {{"coordinator", "ENDPOINT", kCoordinator, "the coordinator's control endpoint"},
                 {"timeout-ms", "N", "3000", "how long to wait for the reply",
                  cli::IntRangeOf<int64_t>()}}});
  return table;
}

const cli::FlagTable& ServeFlagTable() {
  static const cli::FlagTable& table = WithForwardedCoordinatorFlags(
      {.command = "splitspec serve",
       .summary = "start the cluster a config describes (coordinator, target groups, draft "
                  "workers) as processes on this host, until Ctrl-C; flags override the file",
       .flags = {{"config", "FILE", "deploy/cluster.toml when it exists",
                  "the cluster config (TOML)"},
                 {"dry-run", "", "",
                  "print the processes it would start as JSON lines; start none"},
                 {"control", "EP", "", "the coordinator's control endpoint (coordinator.control)"},
                 {"advertise", "EP", "", "the endpoint workers connect to (coordinator.advertise)"},
                 {"http", "HOST:PORT|none", "", "the coordinator's HTTP API (coordinator.http)"},
                 {"model", "PATH", "", "the target model (models.target)"},
                 {"draft", "PATH", "",
                  "the draft model (models.draft, every pool's draft_model; drafter 'model')"},
                 {"drafter", "NAME", "",
                  "every pool's drafter: lookup, ngram, model, layerskip:L or none (plain "
                  "decoding, as --drafts 0)"},
                 {"drafts", "N", "", "the count of the config's only draft pool (0: plain decoding)",
                  cli::IntRangeOf<int>()},
                 {"tree", "auto|off", "off", cli::kTreeFlagHelp},
                 {"draft-placement", "auto|target|workers", "",
                  "every pool's placement: target = the drafter runs inside the target leaders "
                  "(lookup, ngram); workers = draft worker processes; auto = target for model-free "
                  "drafters"},
                 {"targets", "N", "", "N copies of the config's only target group, NAME-0..",
                  cli::IntRangeOf<int>()},
                 {"target-tp", "N", "", "every target group's tensor-parallel size",
                  cli::IntRangeOf<int>()},
                 {"threads", "N", "", "every target group's compute threads",
                  cli::IntRangeOf<int>()},
                 {"kv-cache-memory", "BYTES|PERCENT", "",
                  "every target group's per-rank KV-cache budget (target_group.kv_cache_memory): "
                  "256MiB, 2GiB, or a percentage of the memory left after the weights"},
                 {"kv-cache-type", "f16|q8_0", "",
                  absl::StrCat("every target group's target_group.kv_cache_type: ",
                               model::kKvCacheTypeFlagHelp)},
                 {"log-dir", "DIR", "", "where process logs go (cluster.run_dir)"},
                 {"max-restarts", "N", "5",
                  "restarts of one worker allowed within --restart-window-s; one more death "
                  "stops the cluster (0: never restart)",
                  cli::IntRangeOf<int>()},
                 {"restart-window-s", "S", "60",
                  "the window --max-restarts counts in; the back-off (250 ms, doubling, at "
                  "most 8 s) starts over after a window without a restart"},
                 {"register-timeout", "DURATION", "60s",
                  "a worker not registered with the coordinator this long after its start "
                  "(hung before its first registration) is killed and restarted like a crash "
                  "(e.g. 90s, 2m; a bare number is seconds; 0: never)"}},
       .details = "Unset flags keep the config file's value. Relative paths given as flags "
                  "resolve against the current directory. A worker that dies is restarted "
                  "(back-off, logged, counted in /metrics as splitspec_worker_restarts_total) "
                  "while the cluster keeps serving; the coordinator's exit, or a worker "
                  "crash-looping past --max-restarts, stops it. The coordinator's API key "
                  "comes from the variable coordinator.api_key_env names, never a flag."});
  return table;
}

const cli::FlagTable& ClientFlagTable() {
  static const cli::FlagTable& table = TableWithSampling(
      {.command = "splitspec client",
       .summary = "send one request to a running cluster and stream the text",
       .flags = {{"coordinator", "ENDPOINT", kCoordinator, "the coordinator's control endpoint"},
                 {"model", "PATH", kDefaultModel, "the GGUF whose tokenizer encodes and decodes"},
                 {"prompt", "TEXT", "", "the prompt (or --prompt-ids)"},
                 {"prompt-ids", "1,2,3", "", "the prompt as token ids (or --prompt)"},
                 {"chat", "", "", "wrap --prompt as a user message in the chat template"},
                 {"drafter", "NAME", "", "ask for a drafter; none = the target alone"},
                 {"json", "", "", "print one JSON line with tokens, text and stats"}}},
      /*at=*/4, Concat(Concat(GuidanceFlags(/*with_ids=*/false), ProcessorFlags()), ChoiceFlags()));
  return table;
}

const cli::FlagTable& LogitsFlagTable() {
  static const cli::FlagTable& table =
      Table({.command = "splitspec logits",
             .summary = "run a prompt through the model in one forward call and print the last "
                        "position's logits as one JSON line",
             .flags = {{"model", "PATH", "", "the model's GGUF (required)"},
                       {"prompt-ids", "1,2,3", "", "the prompt's token ids (required)"},
                       {"threads", "N", "0", "compute threads; 0 = one per core",
                        cli::IntRangeOf<int>()},
                       {"all-positions", "", "", "print one row per prompt position"}}});
  return table;
}

cli::Flag DeviceFlag() {
  return {"device", "DEV", "cpu",
          "where the model runs: cpu or cuda:N (the target and a model or layerskip drafter)"};
}

absl::StatusOr<model::DeviceSpec> ParseDeviceFlag(const CliArgs& args) {
  absl::StatusOr<model::DeviceSpec> device =
      model::ParseDeviceSpec(args.GetString("device", "cpu"));
  if (!device.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message()));
  }
  return *device;
}

cli::Flag ResultsJsonlFlag() {
  return {"results-jsonl", "FILE", "",
          "also append one JSON line per measure to FILE (engine, gpu, shape, measure, value, "
          "command; the GPU routine's bench/results/gpu/<date>-<gpu>.jsonl)"};
}

cli::Flag ShapeFlag() {
  return {"shape", "NAME", "the model file's name", "the shape label of --results-jsonl lines"};
}

cli::Flag CudaGraphsFlag() {
  return {"cuda-graphs", "on|off", "on",
          "with --device cuda:N: decode and verify steps as replayed CUDA graphs"};
}

absl::StatusOr<bool> ParseCudaGraphsFlag(const CliArgs& args) {
  const std::string value = args.GetString("cuda-graphs", "on");
  if (value != "on" && value != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda-graphs must be on or off, got '", value, "'"));
  }
  return value == "on";
}

cli::Flag KvCacheTypeFlag() {
  return {"kv-cache-type", "f16|q8_0", "f16", model::kKvCacheTypeFlagHelp};
}

absl::StatusOr<model::KvCacheType> ParseKvCacheTypeFlag(const CliArgs& args) {
  return model::ParseKvCacheType(args.GetString("kv-cache-type", "f16"));
}

const cli::FlagTable& GenerateFlagTable() {
  static const cli::FlagTable& table = TableWithSampling(
      {.command = "splitspec generate",
       .summary = "speculative generation in one process: coordinator, target and draft "
                  "workers as threads over inproc:// channels",
       .flags = {{"target", "PATH", "", "the target model's GGUF (required)"},
                 {"draft", "PATH", "", "a draft model's GGUF (drafter 'model')"},
                 {"drafter", "NAME", "model with --draft, else none",
                  "none, ngram, model or layerskip:L"},
                 {"vocab-mapping", "auto|intersection|string", "auto",
                  "a draft whose vocabulary differs from the target's: token-level "
                  "intersection, string-level match, or auto (intersection for rejection, "
                  "string for greedy and coupled verification)"},
                 {"prompt", "TEXT", "", "the prompt, tokenized with the target's tokenizer"},
                 {"prompt-ids", "1,2,3", "", "the prompt as token ids (or --prompt)"},
                 {"min-p", "P", "0", "drop tokens below P times the most likely one"},
                 {"k", "K|auto", "4", "draft tokens per block; auto adapts k per block"},
                 {"samples", "M", "1", "samples to generate; sample i uses seed S + i",
                  cli::IntRangeOf<int>()},
                 {"threads", "N", "0", "the target's compute threads; 0 = one per core",
                  cli::IntRangeOf<int>()},
                 {"draft-threads", "N", "1", "the draft model's compute threads",
                  cli::IntRangeOf<int>()},
                 DeviceFlag(),
                 CudaGraphsFlag(),
                 KvCacheTypeFlag(),
                 {"target-tp", "N", "1", "the target as a tensor-parallel group of N (1, 2, 4, 8)",
                  cli::IntRangeOf<int>()},
                 {"trace", "FILE", "", "write a Chrome trace of the workers' busy intervals"},
                 {"sequential", "", "", "the draft waits for each verification (lookahead 1)"},
                 {"tree", "auto|off", "off", cli::kTreeFlagHelp},
                 {"ignore-eos", "", "", "do not stop at an end-of-generation token"},
                 {"json", "", "", "print one JSON line per sample"}}},
      /*at=*/5, Concat(Concat(GuidanceFlags(/*with_ids=*/true), ProcessorFlags()), ChoiceFlags()));
  return table;
}

const cli::FlagTable& BenchDecodeFlagTable() {
  static const cli::FlagTable& table =
      Table({.command = "splitspec bench decode",
             .summary = "forward-pass benchmark of one model: decode, prefill, memory floor",
             .flags = {{"model", "PATH", "", "the model's GGUF (required)"},
                       {"threads", "N", "0", "compute threads; 0 = one per core",
                        cli::IntRangeOf<int>()},
                       DeviceFlag(),
                       CudaGraphsFlag(),
                       KvCacheTypeFlag(),
                       {"prompt-tokens", "N", "32", "prompt length before decoding",
                        cli::IntRangeOf<int>()},
                       {"decode-tokens", "N", "128", "greedy decode steps timed",
                        cli::IntRangeOf<int>()},
                       {"prefill-tokens", "N", "512", "tokens of the timed prefill",
                        cli::IntRangeOf<int>()},
                       {"batch", "LIST", "1",
                        "also decode B sequences together for each B > 1 in the list "
                        "(aggregate tok/s)"},
                       {"context", "LIST", "",
                        "also, for each C in the list: prefill C tokens (timed), then decode "
                        "--decode-tokens steps at that context"},
                       ResultsJsonlFlag(),
                       ShapeFlag()}});
  return table;
}

const cli::FlagTable& BenchSpecFlagTable() {
  static const cli::FlagTable& table = Table(
      {.command = "splitspec bench spec",
       .summary = "tokens/s of target-only, sequential and overlapped speculative decoding "
                  "through the in-process pipeline, and the transport cost per round",
       .flags = {{"model", "PATH", kDefaultModel, "the model's GGUF"},
                 {"max-tokens", "N", "128", "tokens per run, in [8, 2048]",
                  cli::IntRangeOf<int>()},
                 // Not an int_range: with --workload the value is a list (or auto);
                 // without it GetInt reads it and refuses what is not an int.
                 {"k", "K|LIST", "4",
                  "draft tokens per block, in [1, 16] (with --workload a list K[,K..]: one "
                  "fixed-k row per K beside each drafter's auto row; auto: the auto rows only)"},
                 {"layerskip", "L", "24", "the layers the layerskip drafter keeps",
                  cli::IntRangeOf<int>()},
                 {"drafters", "LIST", "ngram,layerskip,self",
                  "the drafters to measure (with --workload also lookup and model:PATH, "
                  "another GGUF, of another vocabulary too; without it "
                  "also sim:alpha=A,ratio=C); commas separate drafters, except that a "
                  "KEY=VALUE piece continues the drafter before it"},
                 {"sim-grid", "", "",
                  "the simulated drafter at alpha 0.6, 0.8, 0.9 x ratio 5, 10, 20: "
                  "measured speedup of sequential, overlapped and overlapped+cache (with "
                  "its hit rate) beside the pipeline model's"},
                 {"trace-dir", "DIR", "", "write a Chrome trace per run there"},
                 {"rounds", "N", "5",
                  "with sim drafters: rounds per drafter, in [1, 100] (rows give medians); "
                  "with --workload: passes over the workload (default 1), rows give totals "
                  "and each ratio's range over the passes",
                  cli::IntRangeOf<int>()},
                 {"spec-cache", "on|off", "on",
                  "also measure overlapped+cache: one block in flight, the next "
                  "pre-drafted for its likeliest outcomes (with --workload the default "
                  "is off, and on makes every speculative run use the cache)"},
                 {"cache-guard", "on|off", "on",
                  "the draft worker's cache guard: pre-draft only while the cache's hits "
                  "save more than its pre-drafting slows the verification (measured)"},
                 {"workload", "FILE", "",
                  "run a workload suite (JSONL, bench/workloads/) instead: per category, "
                  "target-only vs each drafter at each --k K[,K..] and auto"},
                 {"limit", "N", "0",
                  "with --workload: the first N requests per category; "
                  "0 = all",
                  cli::IntRangeOf<int>()},
                 {"threads", "N", "1", "with --workload: the target's threads",
                  cli::IntRangeOf<int>()},
                 {"draft-placement", "auto|target|workers", "auto",
                  "with --workload: where each drafter runs, as serve's --draft-placement: "
                  "target = inside the target worker (lookup, ngram), workers = a draft "
                  "worker, auto = target for model-free drafters (what serve runs)"},
                 {"tree", "on|off", "off",
                  "with --workload: also run 'NAME tree k=K' and 'NAME tree auto' for the "
                  "drafters that propose trees (lookup, ngram, CPU model drafters): a block "
                  "may be a draft tree when the speculation policy predicts it beats the "
                  "chain (the other configurations send chains only)"},
                 {"lookahead", "N", "2", "with --workload: blocks in flight per request",
                  cli::IntRangeOf<int>()},
                 {"guidance-scale", "S", "1",
                  "with --workload: also run every configuration with classifier-free "
                  "guidance at S (unconditional prompt: BOS + the empty chat)"},
                 {"json", "", "",
                  "with --workload: one JSON object per (category, "
                  "configuration); with sim drafters: per (drafter, configuration)"}},
       .details = "--drafters rule: 'ngram,sim:alpha=0.8,ratio=10,self' names three drafters "
                  "(alpha=.. after sim: and ratio=10 belong to it: a piece KEY=VALUE with no ':' "
                  "before its '=' continues the drafter before it).\n"
                  "Simulated drafters (sim:alpha=A,ratio=C, bench only; serve refuses them): "
                  "the target's own greedy continuation, computed first by a target-only run, "
                  "each token right with probability A, drafting time T_target / C per token "
                  "spent sleeping. Greedy verification only. Every drafter of such a run must "
                  "be sim:."});
  return table;
}

const cli::FlagTable& BenchVerifyFlagTable() {
  static const cli::FlagTable& table =
      Table({.command = "splitspec bench verify",
             .summary = "the cost of a verification block: whole-model forward time of k new "
                        "tokens after a prompt, relative to k = 1",
             .flags = {{"model", "PATH", "", "the model's GGUF (required)"},
                       {"threads", "N", "0", "compute threads; 0 = one per core",
                        cli::IntRangeOf<int>()},
                       DeviceFlag(),
                       CudaGraphsFlag(),
                       KvCacheTypeFlag(),
                       {"prompt-tokens", "N", "32", "prompt length before the timed forwards",
                        cli::IntRangeOf<int>()},
                       {"repeats", "N", "30", "rounds over every k (medians and minima)",
                        cli::IntRangeOf<int>()},
                       {"k", "LIST", "1,2,3,5,8,9,16", "block sizes to time; must start with 1"},
                       {"tree", "", "",
                        "also time one forward over each of five token trees (5 to 32 nodes) "
                        "beside chains of as many tokens"},
                       ResultsJsonlFlag(),
                       ShapeFlag()}});
  return table;
}

const cli::FlagTable& BenchServeFlagTable() {
  static const cli::FlagTable& table =
      Table({.command = "splitspec bench serve",
             .summary = "load over HTTP, speculation on vs off: streamed greedy requests of a "
                        "workload at each concurrency, tok/s, TTFT and inter-token latency, "
                        "outputs checked identical",
             .flags = {{"url", "URL", "",
                        "a running cluster's HTTP API (http://HOST:PORT): on = its default, off = "
                        "the same requests with \"drafter\": \"none\"; unset: start two clusters "
                        "here (on = serve's defaults, off = serve --drafts 0)"},
                       {"off-url", "URL", "",
                        "with --url: a running speculation-off cluster to use "
                        "as off instead"},
                       {"model", "PATH", kDefaultModel,
                        "the model the clusters serve (those started here), whose tokenizer names "
                        "the first differing token"},
                       {"workload", "FILE", "bench/workloads/suite.jsonl",
                        "requests, one JSON line each: chat (messages) or completion (prompt), "
                        "with category and max_tokens"},
                       {"limit", "N", "0", "the first N requests of each category; 0 = all",
                        cli::IntRangeOf<int>()},
                       {"concurrency", "LIST", "1,4,16,64",
                        "requests kept in flight, one sweep point each, in [1, 1024]"},
                       {"rounds", "N", "1",
                        "rounds per concurrency, each a pass with speculation on and one off, "
                        "alternating, in [1, 100]",
                        cli::IntRangeOf<int>()},
                       {"threads", "N", "0",
                        "clusters started here: the target's threads (serve --threads); 0 = "
                        "serve's default",
                        cli::IntRangeOf<int>()},
                       {"config", "FILE", "", "clusters started here: serve --config FILE"},
                       {"drafter", "NAME", "serve's",
                        "clusters started here: the speculation-on cluster's drafter (serve "
                        "--drafter: lookup, ngram, model or layerskip:L)"},
                       {"draft", "PATH", "",
                        "clusters started here: the speculation-on cluster's draft model (serve "
                        "--draft, for --drafter model)"},
                       {"log-dir", "DIR", "a fresh /tmp/splitspec-bench-serve-*",
                        "clusters started here: their run directories DIR/on and DIR/off (logs, "
                        "keys)"},
                       {"timeout-s", "S", "600", "one request's time limit, in seconds",
                        cli::IntRangeOf<int>()},
                       {"json", "", "", "one JSON object per concurrency instead of the table"}},
             .details = "The API key, when the cluster wants one, is read from $SPLITSPEC_API_KEY. "
                        "Requests are greedy (temperature 0) with each line's max_tokens, streamed "
                        "with stream_options.include_usage. tok/s: completion tokens / wall time "
                        "over all clients; TTFT: sent to the first text event; ITL: between "
                        "consecutive text events; TPOT: (end - TTFT) / (tokens - 1). A difference "
                        "between the outputs with speculation on and off fails the run (exit 1), "
                        "naming the request and the first differing token."});
  return table;
}

const cli::FlagTable& PlanFlagTable() {
  static const cli::FlagTable& table =
      Table({.command = "splitspec plan",
             .summary = "the analytic speedup model for sequential and overlapped draft/verify",
             .flags = {{"alpha", "A", "", "acceptance rate in [0, 1] (required)"},
                       {"cost-ratio", "C", "", "T_target / T_draft, > 0 (required)"},
                       {"k", "K", "the optimum", "draft tokens per block, in [1, 100]",
                        cli::IntRangeOf<int>()},
                       {"verify-slope", "S", "0",
                        "verify cost growth: a forward of k + 1 tokens costs 1 + S k target "
                        "steps (bench verify)"},
                       {"cache-hit-rate", "H", "0",
                        "overlapped: the fraction of refills after a rejection served from "
                        "the draft worker's speculation cache, in [0, 1]"},
                       {"block-overhead", "O", "0",
                        "per-block trips and turnaround outside the target's step and the "
                        "drafting, in target steps (bench spec --sim-grid measures it)"},
                       {"json", "", "", "print one JSON object instead of the table"}}});
  return table;
}

const cli::FlagTable& KeygenFlagTable() {
  static const cli::FlagTable& table = Table(
      {.command = "splitspec keygen",
       .summary = "write a CURVE keypair for a cluster role: DIR/ROLE.pub and DIR/ROLE.key (0600)",
       .flags = {{"out", "DIR", "", "the key directory (made 0700 if absent; required)"},
                 {"name", "ROLE", "",
                  "coordinator, target, draft, client, admin, or all (required unless a "
                  "worker key is asked for)"},
                 {"draft-workers", "N", "0",
                  "also write draft.d/draft-0 .. draft-(N-1): a key of its own for each draft "
                  "worker started with --name draft-I",
                  cli::IntRangeOf<int>()},
                 {"draft-worker", "NAME", "",
                  "also write draft.d/NAME for the draft worker started with --name NAME "
                  "(comma-separated for several)"},
                 {"target-workers", "N", "0",
                  "also write target.d/target-0 .. target-(N-1): a key of its own for each "
                  "target rank started with --name target-I",
                  cli::IntRangeOf<int>()},
                 {"target-worker", "NAME", "",
                  "also write target.d/NAME for the target rank started with --name NAME "
                  "(comma-separated for several)"},
                 {"rotate", "ROLE", "",
                  "replace the keys of target, draft, client or admin (ROLE.key and every "
                  "ROLE.d/NAME.key) with fresh ones in a running cluster; the old public keys "
                  "stay accepted for --grace-s (DIR/retiring), while workers are restarted or "
                  "replaced onto the new keys"},
                 {"grace-s", "S", "300",
                  "with --rotate: how long the coordinator and targets still accept the old "
                  "keys"}}});
  return table;
}

const cli::FlagTable& ScaleFlagTable() {
  static const cli::FlagTable& table = Table(
      {.command = "splitspec scale",
       .summary = "grow (+N: start workers here) or drain (-N) the pools of a running cluster",
       .flags = {{"coordinator", "ENDPOINT", kCoordinator, "the coordinator's control endpoint"},
                 {"draft", "+N|-N", "", "start or drain N draft workers"},
                 {"target-groups", "+N|-N", "", "start or drain N target groups"},
                 {"worker-ids", "ID,ID", "", "with one -N: drain exactly these workers"},
                 {"roll", "draft|target", "",
                  "replace every serving worker of the role: start as many new ones (on the "
                  "keys in SPLITSPEC_KEYS now, e.g. after `keygen --rotate`), then drain the "
                  "old ones"},
                 {"model", "PATH", kDefaultModel, "new workers' target model"},
                 {"drafter", "NAME", "model with --draft-model, else ngram",
                  "new draft workers' drafter"},
                 {"draft-model", "PATH", "", "new draft workers' draft model"},
                 {"threads", "N", "0", "new target workers' threads; 0 = one per core",
                  cli::IntRangeOf<int>()},
                 {"target-tp", "N", "1", "ranks per new target group",
                  cli::IntRangeOf<int>()},
                 {"host", "ADDR", "127.0.0.1", "where new target workers bind their data endpoint"},
                 {"log-dir", "DIR", "build/cluster", "new workers' logs"},
                 {"drain-timeout-ms", "N", "0",
                  "a draining group's time to finish; 0 = the coordinator's",
                  cli::IntRangeOf<int>()},
                 {"wait-s", "N", "120", "how long to wait for workers to register or leave",
                  cli::IntRangeOf<int64_t>()},
                 {"force", "", "off",
                  "allow draining the last target group (only while no request waits or runs)"}}});
  return table;
}

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand>* const commands = new std::vector<Subcommand>{
      {"serve", ServeFlagTable().summary, &ServeFlagTable(), RunServeCommand},
      {"client", ClientFlagTable().summary, &ClientFlagTable(), RunClientCommand},
      {"status", StatusFlagTable().summary, &StatusFlagTable(), RunStatusCommand},
      {"scale", ScaleFlagTable().summary, &ScaleFlagTable(), RunScaleCommand},
      {"generate", GenerateFlagTable().summary, &GenerateFlagTable(), RunGenerateCommand},
      {"logits", LogitsFlagTable().summary, &LogitsFlagTable(), RunLogitsCommand},
      {"bench",
       "benchmarks: decode (one model's forward pass), spec (speculative pipeline), verify (the "
       "cost of a verification block), serve (a cluster under load over HTTP, speculation on "
       "vs off)",
       nullptr,
       RunBenchCommand,
       {{"decode", BenchDecodeFlagTable().summary, &BenchDecodeFlagTable(), RunBenchCommand},
        {"spec", BenchSpecFlagTable().summary, &BenchSpecFlagTable(), RunBenchSpec},
        {"verify", BenchVerifyFlagTable().summary, &BenchVerifyFlagTable(), RunBenchVerify},
        {"serve", BenchServeFlagTable().summary, &BenchServeFlagTable(), RunBenchServe}}},
      {"plan", PlanFlagTable().summary, &PlanFlagTable(), RunPlanCommand},
      {"keygen", KeygenFlagTable().summary, &KeygenFlagTable(), RunKeygenCommand},
  };
  return *commands;
}

namespace {

bool IsHelpWord(const std::string& arg) { return arg == "--help" || arg == "-h" || arg == "help"; }

std::string Listing(const std::string& usage, const char* heading,
                    const std::vector<Subcommand>& commands) {
  std::string out = absl::StrCat("usage: ", usage, "\n\n", heading, ":\n");
  for (const Subcommand& c : commands) {
    absl::StrAppend(&out, "  ", c.name,
                    std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' '), c.summary, "\n");
  }
  return out;
}

// Runs `command` with `args` (after its name), or prints the help asked for.
int Dispatch(const Subcommand& command, const CommandArgs& args) {
  if (command.flags != nullptr) {
    if (cli::HelpRequested(args, *command.flags)) {
      std::fputs(cli::Help(*command.flags).c_str(), stdout);
      return 0;
    }
    return command.run(args);
  }
  const std::string usage = absl::StrCat("splitspec ", command.name, " <name> [flags]");
  if (!args.empty() && IsHelpWord(args[0])) {
    std::fputs(Listing(usage, "names", command.children).c_str(), stdout);
    return 0;
  }
  for (const Subcommand& child : command.children) {
    if (args.empty() || args[0] != child.name || child.flags == nullptr) continue;
    if (cli::HelpRequested(CommandArgs(args.begin() + 1, args.end()), *child.flags)) {
      std::fputs(cli::Help(*child.flags).c_str(), stdout);
      return 0;
    }
  }
  return command.run(args);
}

}  // namespace

int RunSplitspec(const CommandArgs& args) {
  const std::string usage = "splitspec <command> [flags]   (splitspec <command> --help: its flags)";
  if (args.empty() || IsHelpWord(args[0])) {
    std::fputs(Listing(usage, "commands", Subcommands()).c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  for (const Subcommand& c : Subcommands()) {
    if (args[0] == c.name) return Dispatch(c, CommandArgs(args.begin() + 1, args.end()));
  }
  std::fprintf(stderr, "splitspec: unknown command '%s'\n", args[0].c_str());
  std::fputs(Listing(usage, "commands", Subcommands()).c_str(), stderr);
  return 2;
}

}  // namespace splitspec::tools
