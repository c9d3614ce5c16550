// `splitspec bench spec [--model PATH] [--max-tokens N] [--k K] [--layerskip L]
//                       [--drafters ngram,layerskip,self] [--trace-dir DIR]
//                       [--spec-cache on|off]`
// (with --workload FILE: the workload-suite mode of tools/bench_spec_workload.cc)
//
// One run, one machine, the default model: for each workload (an input-grounded
// edit of a given text, and open-ended chat) it measures greedy generation
// tokens/s through the whole in-process pipeline (coordinator, target and draft
// workers as threads over inproc:// channels):
//   target-only   the target alone, 1 thread (and 2 threads, for reference)
//   sequential    draft then verify, the classic loop (lookahead 1)
//   overlapped    the draft runs ahead while the target verifies (lookahead 2)
//   overl.+cache  (--spec-cache on) one block in flight; while it is verified the
//                 draft pre-drafts the next block for its likeliest outcomes
//                 (draft_worker/draft_engine.h), with the cache's hit rate
//   auto window   (--spec-cache on) the draft worker chooses sequential,
//                 overlapped or cached per request from what it measures
// with the target and the draft on one thread each (one core each on a 2-core
// machine: the "devices"). It prints acceptance rate = accepted / verified,
// draft utilization = accepted / drafted, tokens per step = generated / steps,
// and the ratios overlapped/sequential and speculative/target-only. A ping-pong
// of the real protocol messages (a DraftBlock with sparse q, answered by a
// VerifyResult) over inproc:// and tcp:// loopback gives the transport and
// protocol cost per round.
#include <sys/resource.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_features.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel.h"
#include "runtime/net/request_client.h"
#include "runtime/net/spec_proto.h"
#include "runtime/net/wire_format.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tools/bench_spec.h"
#include "tools/cluster/in_process_cluster.h"
#include "tools/commands.h"
#include "tools/default_paths.h"
#include "tools/sim_drafter.h"

namespace splitspec::tools {
namespace {

// User + system CPU time of this process (every thread).
double ProcessCpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

absl::StatusOr<SpecRunResult> RunSpecGeneration(
    model::Transformer* target, spec::Drafter* drafter, int lookahead, int k,
    const std::vector<int32_t>& prompt, int max_tokens, const std::vector<int32_t>& stop_token_ids,
    bool spec_cache, bool adaptive_window, float guidance_scale,
    const std::vector<int32_t>& negative_prompt, bool cache_guard,
    const SpecRunConstraint& constraint, bool trees) {
  InProcessClusterOptions options;
  options.target_engine.grammar_compiler = constraint.compiler;
  options.draft_engine.spec_cache = spec_cache;
  options.draft_engine.adaptive_window = adaptive_window;
  options.draft_engine.cache_guard = cache_guard;
  options.draft_engine.trees = trees;
  options.target = target;
  options.drafter = drafter;
  options.draft_engine.lookahead_blocks = lookahead;
  options.draft_engine.default_k = k;
  options.router.max_new_tokens = max_tokens;
  ASSIGN_OR_RETURN(std::unique_ptr<InProcessCluster> cluster, InProcessCluster::Start(options));
  ASSIGN_OR_RETURN(std::unique_ptr<net::RequestClient> client,
                   net::RequestClient::Connect(cluster->coordinator_endpoint()));
  static int run_counter = 0;
  proto::SubmitRequest submit;
  submit.set_request_id(absl::StrCat("bench-", ++run_counter));
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.mutable_params()->set_temperature(0.0f);
  submit.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  submit.mutable_params()->mutable_stop_token_ids()->Assign(stop_token_ids.begin(),
                                                            stop_token_ids.end());
  if (guidance_scale != 1.0f) {
    submit.mutable_params()->set_guidance_scale(guidance_scale);
    submit.mutable_params()->mutable_negative_prompt_tokens()->Assign(negative_prompt.begin(),
                                                                      negative_prompt.end());
  }
  if (constraint.grammar.has_value()) {
    net::GrammarToProto(*constraint.grammar,
                        submit.mutable_params()->mutable_processors()->mutable_grammar());
  }
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_draft_k(static_cast<uint32_t>(k));
  if (drafter == nullptr) submit.set_drafter("none");
  Tracer::Global().Clear();
  const double cpu_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(net::GenerationResult result, client->Generate(submit, absl::Minutes(10)));
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  cluster->KillDraftWorker();  // its counters are safe to read once its thread is gone
  if (result.finish_reason == proto::FINISH_REASON_ERROR) return absl::InternalError(result.error);
  SpecRunResult run;
  run.tokens = static_cast<int>(result.tokens.size());
  run.output = result.tokens;
  run.tokens_per_s = run.tokens / wall;
  run.stats = result.stats;
  run.wall_s = wall;
  run.cpu_s = cpu;
  run.cache = cluster->CacheCountersAfterKill();
  run.draft_busy_s = absl::ToDoubleSeconds(Tracer::Global().BusyTime("draft"));
  run.target_busy_s = absl::ToDoubleSeconds(Tracer::Global().BusyTime("target"));
  return run;
}

namespace {

constexpr char kEditText[] =
    "The old lighthouse stood at the edge of the cliff for more than a hundred years. Every night "
    "its keeper "
    "climbed the narrow stairs, cleaned the great lens and lit the lamp, so that ships passing in "
    "the dark "
    "would know where the rocks were. When the keeper grew old, the town decided to replace the "
    "lamp with an "
    "automatic light, but the people still walked to the cliff on summer evenings to watch the "
    "beam turn "
    "slowly over the water.";

struct Workload {
  std::string name;
  std::string user_message;
};

std::vector<Workload> Workloads() {
  return {
      {"edit",
       absl::StrCat("Rewrite the following text exactly, word for word, but change 'lighthouse' to "
                    "'tower':\n\n",
                    kEditText)},
      {"chat", "Write a short story about a robot who learns to paint."}};
}

struct BenchFlags {
  std::string model;
  int max_tokens = 128;
  int k = 4;
  int layerskip = 24;
  std::vector<std::string> drafters = {"ngram", "layerskip", "self"};
  std::string trace_dir;
  bool spec_cache = true;  // also measure overlapped+cache
  bool cache_guard = true;
};

// Mean microseconds for one block -> result round over `endpoint` (both ends in this process).
absl::StatusOr<double> PingPongMicros(const std::string& endpoint, int k, int rounds) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> server, net::ListenChannel(endpoint));
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> client,
                   net::ConnectChannel(server->endpoint(), "bench-draft"));
  proto::Envelope block = net::NewEnvelope();
  proto::DraftBlock* b = block.mutable_draft_block();
  b->set_request_id("bench");
  for (int i = 0; i < k; ++i) {
    b->add_tokens(1000 + i);
    proto::SparseDistribution* q = b->add_q();
    for (int j = 0; j < 64; ++j) {
      q->add_token_ids(j * 37);
      q->add_probs(1.0f / 64);
    }
  }
  proto::Envelope reply = net::NewEnvelope();
  reply.mutable_verify_result()->set_request_id("bench");
  for (int i = 0; i < k + 1; ++i) reply.mutable_verify_result()->add_committed_tokens(2000 + i);
  std::thread echo([&] {
    for (int i = 0; i < rounds + 10; ++i) {
      absl::StatusOr<net::Frame> frame = server->Receive(absl::Seconds(10));
      if (!frame.ok()) return;
      proto::Envelope out = reply;
      out.mutable_verify_result()->set_block_sequence(
          frame->envelope.draft_block().block_sequence());
      (void)server->Send(frame->peer, out);
    }
  });
  absl::Time start;
  for (int i = 0; i < rounds + 10; ++i) {
    if (i == 10) start = absl::Now();  // 10 warm-up rounds
    b->set_block_sequence(i);
    RETURN_IF_ERROR(client->Send("", block));
    ASSIGN_OR_RETURN(net::Frame frame, client->Receive(absl::Seconds(10)));
  }
  const double micros = absl::ToDoubleMicroseconds(absl::Now() - start) / rounds;
  echo.join();
  return micros;
}

absl::StatusOr<BenchFlags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, BenchSpecFlagTable()));
  BenchFlags f;
  f.model = args.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(int max_tokens, args.GetInt<int>("max-tokens", 128));
  ASSIGN_OR_RETURN(int k, args.GetInt<int>("k", 4));
  ASSIGN_OR_RETURN(int layerskip, args.GetInt<int>("layerskip", 24));
  if (max_tokens < 8 || max_tokens > 2048)
    return absl::InvalidArgumentError("--max-tokens must be in [8, 2048]");
  if (k < 1 || k > 16) return absl::InvalidArgumentError("--k must be in [1, 16]");
  f.max_tokens = static_cast<int>(max_tokens);
  f.k = static_cast<int>(k);
  f.layerskip = static_cast<int>(layerskip);
  if (args.Has("drafters")) f.drafters = SplitDrafterList(args.GetString("drafters", ""));
  f.trace_dir = args.GetString("trace-dir", "");
  const std::string spec_cache = args.GetString("spec-cache", "on");
  if (spec_cache != "on" && spec_cache != "off")
    return absl::InvalidArgumentError(
        absl::StrCat("--spec-cache must be on or off, got '", spec_cache, "'"));
  f.spec_cache = spec_cache == "on";
  const std::string cache_guard = args.GetString("cache-guard", "on");
  if (cache_guard != "on" && cache_guard != "off")
    return absl::InvalidArgumentError(
        absl::StrCat("--cache-guard must be on or off, got '", cache_guard, "'"));
  f.cache_guard = cache_guard == "on";
  return f;
}

void PrintRow(const std::string& workload, const std::string& config, const SpecRunResult& r,
              double baseline_tps) {
  const proto::SpecStats& s = r.stats;
  const double acceptance = s.verified() ? static_cast<double>(s.accepted()) / s.verified() : 0;
  const double utilization = s.drafted() ? static_cast<double>(s.accepted()) / s.drafted() : 0;
  const double per_step = s.steps() ? static_cast<double>(r.tokens) / s.steps() : 0;
  std::printf("| %-6s | %-24s | %7.2f | %5.2fx | %6.3f | %6.3f | %5.2f | %5.2f / %5.2f |\n",
              workload.c_str(), config.c_str(), r.tokens_per_s, r.tokens_per_s / baseline_tps,
              acceptance, utilization, per_step, r.draft_busy_s / r.wall_s,
              r.target_busy_s / r.wall_s);
}

absl::Status Run(const BenchFlags& f) {
  SetDefaultLogLevel(LogLevel::kWarning);  // the in-process services stay quiet
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> target,
                   model::Transformer::Load(f.model, {.threads = 1}));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> target2,
                   model::Transformer::Load(f.model, {.threads = 2}));
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(target->file()));
  ASSIGN_OR_RETURN(model::ChatTemplate chat,
                   model::ChatTemplate::FromSource(tokenizer.chat_template()));
  const int vocab = target->config().vocab_size;
  Tracer::Global().Enable();

  std::printf(
      "splitspec bench spec: model %s, %d new tokens per run, greedy, k=%d, cpu %s, %u hardware "
      "threads\n",
      f.model.c_str(), f.max_tokens, f.k, kernels::CpuIsaName(),
      std::thread::hardware_concurrency());
  std::printf(
      "target and draft: 1 thread each; ratio = tok/s / target-only (1 thread) tok/s; busy = draft "
      "/ target "
      "busy time / wall time\n\n");
  std::printf(
      "| work   | configuration            |   tok/s | ratio  | accept | utiliz | tok/st | busy d "
      "/ t    |\n");
  std::printf(
      "|--------|--------------------------|---------|--------|--------|--------|--------|---------"
      "------|\n");
  for (const Workload& w : Workloads()) {
    std::vector<model::ChatMessage> messages = {{"user", w.user_message}};
    ASSIGN_OR_RETURN(std::string text, chat.Apply(messages, true));
    const std::vector<int32_t> prompt =
        tokenizer.Encode(text, {.add_special = true, .parse_special = true});
    ASSIGN_OR_RETURN(SpecRunResult alone,
                     RunSpecGeneration(target.get(), nullptr, 1, f.k, prompt, f.max_tokens, {}));
    PrintRow(w.name, "target-only 1 thread", alone, alone.tokens_per_s);
    ASSIGN_OR_RETURN(SpecRunResult alone2,
                     RunSpecGeneration(target2.get(), nullptr, 1, f.k, prompt, f.max_tokens, {}));
    PrintRow(w.name, "target-only 2 threads", alone2, alone.tokens_per_s);
    for (const std::string& name : f.drafters) {
      const std::string spec_name = name == "layerskip" ? absl::StrCat("layerskip:", f.layerskip)
                                    : name == "self"    ? "model"
                                                        : name;
      ASSIGN_OR_RETURN(spec::DrafterSpec spec,
                       spec::ParseDrafterSpec(spec_name, name == "self" ? f.model : ""));
      ASSIGN_OR_RETURN(std::unique_ptr<spec::Drafter> drafter,
                       spec::MakeDrafter(spec, f.model, &tokenizer, vocab, 1));
      ASSIGN_OR_RETURN(SpecRunResult sequential, RunSpecGeneration(target.get(), drafter.get(), 1,
                                                                   f.k, prompt, f.max_tokens, {}));
      PrintRow(w.name, absl::StrCat(name == "self" ? "self-draft" : spec_name, " sequential"),
               sequential, alone.tokens_per_s);
      if (!f.trace_dir.empty()) {
        RETURN_IF_ERROR(Tracer::Global().WriteChromeJson(
            absl::StrCat(f.trace_dir, "/", w.name, "-", name, "-sequential.json")));
      }
      ASSIGN_OR_RETURN(SpecRunResult overlapped, RunSpecGeneration(target.get(), drafter.get(), 2,
                                                                   f.k, prompt, f.max_tokens, {}));
      PrintRow(w.name, absl::StrCat(name == "self" ? "self-draft" : spec_name, " overlapped"),
               overlapped, alone.tokens_per_s);
      if (!f.trace_dir.empty()) {
        RETURN_IF_ERROR(Tracer::Global().WriteChromeJson(
            absl::StrCat(f.trace_dir, "/", w.name, "-", name, "-overlapped.json")));
      }
      std::printf("|        |   overlapped / sequential = %.2fx\n",
                  overlapped.tokens_per_s / sequential.tokens_per_s);
      if (!f.spec_cache) continue;
      ASSIGN_OR_RETURN(SpecRunResult cached,
                       RunSpecGeneration(target.get(), drafter.get(), 1, f.k, prompt, f.max_tokens,
                                         {}, /*spec_cache=*/true, /*adaptive_window=*/false, 1.0f,
                                         {}, f.cache_guard));
      PrintRow(w.name, absl::StrCat(name == "self" ? "self-draft" : spec_name, " overl.+cache"),
               cached, alone.tokens_per_s);
      const spec::SpeculationCacheCounters& c = cached.cache;
      std::printf(
          "|        |   overlapped+cache / sequential = %.2fx; cache hit rate %.3f (%llu full + "
          "%llu partial of %llu; all-accepted %llu/%llu, rejection %llu/%llu), %llu tokens "
          "pre-drafted, %llu used; %llu blocks unplanned (the cache guard)\n",
          cached.tokens_per_s / sequential.tokens_per_s, c.HitRate(),
          static_cast<unsigned long long>(c.hits), static_cast<unsigned long long>(c.partial_hits),
          static_cast<unsigned long long>(c.lookups),
          static_cast<unsigned long long>(c.hits_all_accepted),
          static_cast<unsigned long long>(c.lookups_all_accepted),
          static_cast<unsigned long long>(c.hits_rejected),
          static_cast<unsigned long long>(c.lookups_rejected),
          static_cast<unsigned long long>(c.drafted_tokens),
          static_cast<unsigned long long>(c.used_tokens),
          static_cast<unsigned long long>(c.unplanned_blocks));
      ASSIGN_OR_RETURN(SpecRunResult adaptive,
                       RunSpecGeneration(target.get(), drafter.get(), 2, f.k, prompt, f.max_tokens,
                                         {}, /*spec_cache=*/true,
                                         /*adaptive_window=*/true, 1.0f, {}, f.cache_guard));
      PrintRow(w.name, absl::StrCat(name == "self" ? "self-draft" : spec_name, " auto window"),
               adaptive, alone.tokens_per_s);
      std::printf("|        |   auto window / sequential = %.2fx; cache hit rate %.3f\n",
                  adaptive.tokens_per_s / sequential.tokens_per_s, adaptive.cache.HitRate());
    }
  }
  std::printf(
      "\ntransport + protocol per round (DraftBlock of k=%d with 64-entry sparse q, then a "
      "VerifyResult):\n",
      f.k);
  for (const std::string endpoint : {"inproc://bench-pingpong", "tcp://127.0.0.1:*"}) {
    ASSIGN_OR_RETURN(double micros, PingPongMicros(endpoint, f.k, 2000));
    std::printf("  %-24s %7.1f us per round (mean of 2000)\n", endpoint.c_str(), micros);
  }
  return absl::OkStatus();
}

}  // namespace

int RunBenchSpec(const CommandArgs& args) {
  for (const std::string& arg : args) {
    if (arg == "--workload" || arg.rfind("--workload=", 0) == 0) return RunBenchSpecWorkload(args);
  }
  // Parse errors are left to each mode's own parser, which names them.
  absl::StatusOr<CliArgs> parsed = CliArgs::Parse(args, BenchSpecFlagTable());
  if (parsed.ok() && parsed->Has("guidance-scale")) {
    std::fprintf(stderr, "splitspec bench spec: --guidance-scale runs only with --workload\n");
    return 2;
  }
  if (WantsSimBench(args)) return RunBenchSpecSim(args);
  absl::StatusOr<BenchFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec bench spec: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status status = Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec bench spec: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace splitspec::tools
