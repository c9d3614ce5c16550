// `splitspec bench spec --workload FILE [--model PATH] [--limit N] [--threads N]
//                       [--k K[,K..]] [--drafters ngram,lookup,layerskip,self]
//                       [--layerskip L] [--lookahead N] [--guidance-scale S] [--rounds N]
//                       [--draft-placement auto|target|workers] [--json]`
//
// Runs every request of a workload file (tools/workload_suite.h; the suite is
// bench/workloads/suite.jsonl; a line's response_format constrains its output as over
// HTTP) through the whole in-process pipeline, greedily
// (temperature 0, greedy verification: the output equals the target's own
// greedy decode, and the bench fails if any configuration's output differs
// from target-only's), once per configuration:
//   target-only       the target alone
//   NAME k=K          drafter NAME with a fixed k (each K of --k; `--k auto`: none)
//   NAME auto         drafter NAME with the speculation policy (draft_k 0)
//   NAME tree k=K     with --tree on, for drafters that propose trees (lookup, ngram,
//                     model drafters on the CPU: self, layerskip, model:PATH):
//   NAME tree auto    as above, but a block may be a draft tree when the policy's tree
//                     rule predicts it beats the chain (depth <= K; auto: <= max k);
//                     the other configurations send chains only
// Drafters run where serve runs them (--draft-placement auto): lookup and ngram inside
// the target worker (target_worker/local_drafts.h), model drafters in a draft worker
// on 1 thread; target / workers put every drafter in one place.
// Each configuration keeps one set of workers (a SpecSession, tools/bench_spec.h)
// for the whole workload, as `serve` keeps its workers across requests: the costs
// its draft worker measures (the policy's inputs but acceptance) carry over, so
// the policy's cold start is paid once per run, not once per request.
// With --guidance-scale S (not 1) every configuration also runs guided ("... cfg":
// classifier-free guidance at S, unconditional prompt BOS + the empty chat), and a
// summary per category gives the cost of guidance (target-only cfg / target-only)
// and the gain of speculation under guidance (each NAME cfg / target-only cfg).
// Configurations are interleaved per request (request 1 in every configuration,
// then request 2, ...), so machine noise hits them alike, and request i starts
// with configuration i (mod their number), so none always runs first. It prints per category
// tok/s (total tokens / total wall time), the ratio to target-only measured in
// the same run, acceptance (accepted / verified draft tokens) and tokens per
// target step; with --json one object per line per (category, configuration)
// (tools/workload_suite.h: WorkloadRowJson), then under guidance one object per
// category (GuidanceSummaryJson). --rounds N makes N passes over the workload (pass r
// starts request i at configuration i + r), the rows total them and give each
// ratio's lowest and highest pass: on a shared machine one pass's ratio moves by
// 0.1-0.2 (a category's target-only tok/s by up to 15% within a minute), so a ratio
// near 1 is judged by the total over several passes. --limit N keeps the first N
// requests of each category. The target runs on --threads threads (1), each
// drafter on 1 thread; generation stops at the model's end-of-generation tokens.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_features.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/config/cluster_config.h"
#include "runtime/cli/cli_args.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tools/bench_spec.h"
#include "tools/commands.h"
#include "tools/default_paths.h"
#include "tools/sim_drafter.h"
#include "tools/workload_suite.h"

namespace splitspec::tools {
namespace {

struct WorkloadBenchFlags {
  std::string workload;
  std::string model;
  int limit = 0;
  int threads = 1;
  std::vector<int> ks = {4};
  std::vector<std::string> drafters = {"ngram", "lookup", "layerskip", "self"};
  int layerskip = 24;
  int lookahead = 2;
  int rounds = 1;  // passes over the workload
  // Where the drafters run (serve's --draft-placement): "auto" (model-free ones in the
  // target worker, the others in a draft worker), "target" or "workers".
  std::string draft_placement = "auto";
  bool spec_cache = false;  // --spec-cache on: every speculative run uses the cache
  bool trees = false;       // --tree on: also the tree configurations
  bool json = false;
  float guidance_scale = 1.0f;
};

// Drafters that need no model: the only ones --draft-placement target may put in the
// target worker (runtime/config/cluster_config_validate.cc refuses the rest for serve).
bool IsModelFreeDrafter(const std::string& name) { return name == "lookup" || name == "ngram"; }

absl::StatusOr<int> BoundedInt(const CliArgs& args, const char* flag, int fallback, int low,
                               int high) {
  ASSIGN_OR_RETURN(int value, args.GetInt<int>(flag, fallback));
  if (value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be in [", low, ", ", high, "], got ", value));
  }
  return static_cast<int>(value);
}

absl::StatusOr<WorkloadBenchFlags> ParseWorkloadFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, BenchSpecFlagTable()));
  WorkloadBenchFlags f;
  f.workload = args.GetString("workload", "");
  if (f.workload.empty()) return absl::InvalidArgumentError("--workload needs a file");
  f.model = args.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(f.limit, BoundedInt(args, "limit", 0, 0, 1 << 20));
  ASSIGN_OR_RETURN(f.threads, BoundedInt(args, "threads", 1, 1, 256));
  ASSIGN_OR_RETURN(f.layerskip, BoundedInt(args, "layerskip", 24, 1, 1024));
  ASSIGN_OR_RETURN(f.lookahead, BoundedInt(args, "lookahead", 2, 1, 8));
  ASSIGN_OR_RETURN(f.rounds, BoundedInt(args, "rounds", 1, 1, 100));
  const std::string spec_cache = args.GetString("spec-cache", "off");
  if (spec_cache != "on" && spec_cache != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--spec-cache must be on or off, got '", spec_cache, "'"));
  }
  f.spec_cache = spec_cache == "on";
  f.draft_placement = args.GetString("draft-placement", "auto");
  if (f.draft_placement != "auto" && f.draft_placement != "target" &&
      f.draft_placement != "workers") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--draft-placement must be auto, target or workers, got '", f.draft_placement, "'"));
  }
  const std::string tree = args.GetString("tree", "off");
  if (tree != "on" && tree != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--tree must be on or off, got '", tree, "'"));
  }
  f.trees = tree == "on";
  if (args.Has("k")) {
    f.ks.clear();
    for (absl::string_view part : absl::StrSplit(args.GetString("k", ""), ',', absl::SkipEmpty())) {
      if (part == "auto") continue;  // the policy's rows run anyway: `--k auto` keeps only them
      int k = 0;
      if (!absl::SimpleAtoi(part, &k) || k < 1 || k > 16) {
        return absl::InvalidArgumentError(
            absl::StrCat("--k: each K must be an integer in [1, 16] or auto, got '", part, "'"));
      }
      f.ks.push_back(k);
    }
  }
  if (args.Has("drafters")) f.drafters = SplitDrafterList(args.GetString("drafters", ""));
  for (const std::string& name : f.drafters) {
    if (IsSimDrafterName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "drafter '", name, "': simulated drafters run without --workload (one prompt)"));
    }
    if (f.draft_placement == "target" && !IsModelFreeDrafter(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--draft-placement target: drafter '", name,
                       "' needs a model, which runs in a draft worker (target runs lookup and "
                       "ngram only)"));
    }
  }
  f.json = args.Has("json");
  ASSIGN_OR_RETURN(double scale, args.GetDouble("guidance-scale", 1.0));
  if (!(scale >= 0.0 && scale <= 100.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--guidance-scale must be in [0, 100], got ", scale));
  }
  f.guidance_scale = static_cast<float>(scale);
  return f;
}

struct Configuration {
  std::string name;                  // "target-only", "ngram k=4", "ngram auto"
  spec::Drafter* drafter = nullptr;  // null: target-only
  int k = 0;                         // 0: adaptive
  bool guided = false;               // classifier-free guidance at --guidance-scale
  bool trees = false;                // tree blocks allowed ("NAME tree ...")
  bool in_target = false;            // the drafter runs inside the target worker
};

// Greedy speculation is lossless: every configuration's output must be the
// target-only output of the same guidance, token for token. A speedup measured
// on different text would be no speedup, so a difference fails the bench.
absl::Status CheckSameAsTargetOnly(const std::vector<Configuration>& configurations,
                                   const std::vector<std::vector<int32_t>>& outputs,
                                   const std::string& where) {
  for (size_t c = 0; c < configurations.size(); ++c) {
    for (size_t r = 0; r < configurations.size(); ++r) {
      if (configurations[r].drafter != nullptr ||
          configurations[r].guided != configurations[c].guided)
        continue;
      const std::vector<int32_t>& want = outputs[r];
      const std::vector<int32_t>& got = outputs[c];
      if (got == want) break;
      size_t at = 0;
      while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
      return absl::InternalError(
          absl::StrCat(where, " (", configurations[c].name, "): greedy output differs from ",
                       configurations[r].name, " at token ", at, " (", got.size(), " vs ",
                       want.size(), " tokens): speculation was not exact"));
    }
  }
  return absl::OkStatus();
}

// The unconditional prompt of the guided runs, as the HTTP front door makes it for
// a chat request without a negative prompt: BOS, then the empty conversation.
absl::StatusOr<std::vector<int32_t>> UnconditionalPrompt(const model::Tokenizer& tokenizer,
                                                         const model::ChatTemplate& chat) {
  std::vector<int32_t> ids = model::EncodeChat(tokenizer, chat.RenderEmptyConversation());
  if (tokenizer.bos_id() >= 0 && (ids.empty() || ids.front() != tokenizer.bos_id()))
    ids.insert(ids.begin(), tokenizer.bos_id());
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        "--guidance-scale: the model has no BOS token and its chat template renders an empty "
        "conversation to nothing, so there is no unconditional prompt");
  }
  return ids;
}

// Per category: guided target-only / target-only, and each guided configuration /
// guided target-only (rows of one run).
void PrintGuidanceSummary(const std::vector<WorkloadRow>& rows, float guidance_scale) {
  std::printf(
      "\nclassifier-free guidance at scale %g, same run (cost: target-only cfg / target-only; "
      "gain: NAME cfg / target-only cfg):\n",
      guidance_scale);
  for (const GuidanceSummary& s : GuidanceSummaries(rows)) {
    std::printf("  %-13s cost of guidance: tok/s %.2fx, cpu ms/tok %.2fx\n", s.category.c_str(),
                s.cost_tok_s_ratio, s.cost_cpu_ms_per_token_ratio);
    for (const auto& [name, gain] : s.speculation_gain) {
      std::printf("  %-13s speculation under guidance: %-18s tok/s %.2fx\n", s.category.c_str(),
                  name.c_str(), gain);
    }
  }
}

absl::StatusOr<std::unique_ptr<spec::Drafter>> LoadDrafter(const std::string& name,
                                                           const WorkloadBenchFlags& f,
                                                           const model::Tokenizer& tokenizer,
                                                           int vocab) {
  // model:PATH: another GGUF (of another vocabulary too: vocab mapping auto).
  const bool other_model = absl::StartsWith(name, "model:");
  const std::string spec_name = name == "layerskip" ? absl::StrCat("layerskip:", f.layerskip)
                                : name == "self" || other_model ? "model"
                                                                : name;
  const std::string draft_path = name == "self" ? f.model : other_model ? name.substr(6) : "";
  ASSIGN_OR_RETURN(spec::DrafterSpec spec, spec::ParseDrafterSpec(spec_name, draft_path));
  return spec::MakeDrafter(spec, f.model, &tokenizer, vocab, 1);
}

struct Prepared {
  const WorkloadRequest* request;
  std::vector<int32_t> prompt;
};

absl::StatusOr<std::vector<Prepared>> Tokenize(const std::vector<WorkloadRequest>& requests,
                                               const model::Tokenizer& tokenizer,
                                               const model::ChatTemplate& chat) {
  std::vector<Prepared> prepared;
  for (const WorkloadRequest& request : requests) {
    std::string text = request.prompt;  // a completion's prompt is the model's input as it stands
    if (request.messages.size() > 0) {
      ASSIGN_OR_RETURN(text, chat.Apply(request.messages, /*add_generation_prompt=*/true));
    }
    prepared.push_back(
        {&request, tokenizer.Encode(text, {.add_special = true, .parse_special = true})});
  }
  return prepared;
}

void PrintTable(const std::vector<WorkloadRow>& rows) {
  std::printf(
      "| category      | configuration      | reqs |   tok/s | ratio  | passes' ratios | accept | "
      "tok/step | cpu ms/tok | trees |\n");
  std::printf(
      "|---------------|--------------------|------|---------|--------|----------------|--------|-"
      "---------|------------|-------|\n");
  for (const WorkloadRow& r : rows) {
    std::printf(
        "| %-13s | %-18s | %4d | %7.2f | %5.2fx |  %5.2f - %5.2f | %6.3f | %8.2f | %10.2f | %5.2f "
        "|\n",
        r.category.c_str(), r.configuration.c_str(), r.requests, r.tok_s, r.ratio_to_target_only,
        r.ratio_low, r.ratio_high, r.acceptance, r.tokens_per_step, r.cpu_ms_per_token,
        r.tree_share);
  }
}

absl::Status RunWorkload(const WorkloadBenchFlags& f) {
  SetDefaultLogLevel(LogLevel::kWarning);  // the in-process services stay quiet
  ASSIGN_OR_RETURN(std::vector<WorkloadRequest> all, LoadWorkload(f.workload));
  const std::vector<WorkloadRequest> requests = FirstPerCategory(all, f.limit);
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> target,
                   model::Transformer::Load(f.model, {.threads = f.threads}));
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(target->file()));
  ASSIGN_OR_RETURN(model::ChatTemplate chat,
                   model::ChatTemplate::FromSource(tokenizer.chat_template()));
  ASSIGN_OR_RETURN(std::vector<Prepared> prepared, Tokenize(requests, tokenizer, chat));
  std::vector<int32_t> stop_ids;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsEndOfGeneration(id)) stop_ids.push_back(id);
  }
  // Structured outputs (a line's response_format): one compiler for the whole run, each
  // grammar compiled before the timed runs (the compiler caches it), so a run's time is
  // decoding under the constraint, not compiling it.
  std::vector<std::optional<grammar::GrammarSpec>> grammars(prepared.size());
  std::shared_ptr<grammar::GrammarCompiler> compiler;
  for (size_t i = 0; i < prepared.size(); ++i) {
    ASSIGN_OR_RETURN(grammars[i], ResponseFormatGrammar(*prepared[i].request, f.workload));
    if (!grammars[i].has_value()) continue;
    if (compiler == nullptr) {
      ASSIGN_OR_RETURN(compiler, grammar::GrammarCompiler::Create(
                                     tokenizer, {.vocab_size = target->config().vocab_size}));
    }
    absl::Status compiled = compiler->Compile(*grammars[i]).status();
    if (!compiled.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(f.workload, ":", prepared[i].request->line,
                                                     ": response_format: ", compiled.message()));
    }
  }

  std::vector<std::unique_ptr<spec::Drafter>> drafters;
  std::vector<Configuration> configurations = {{kTargetOnly, nullptr, 0}};
  for (const std::string& name : f.drafters) {
    ASSIGN_OR_RETURN(std::unique_ptr<spec::Drafter> drafter,
                     LoadDrafter(name, f, tokenizer, target->config().vocab_size));
    // Where serve would run it: the pool config's own rule (RunsInTargets).
    config::DraftPoolConfig pool;
    pool.drafter = name;
    pool.placement = f.draft_placement;
    const bool in_target = pool.RunsInTargets();
    for (int k : f.ks) {
      configurations.push_back({absl::StrCat(name, " k=", k), drafter.get(), k, /*guided=*/false,
                                /*trees=*/false, in_target});
    }
    configurations.push_back({absl::StrCat(name, " auto"), drafter.get(), 0, /*guided=*/false,
                              /*trees=*/false, in_target});
    if (f.trees && drafter->ProposesTrees()) {
      for (int k : f.ks) {
        configurations.push_back({absl::StrCat(name, " tree k=", k), drafter.get(), k,
                                  /*guided=*/false, /*trees=*/true, in_target});
      }
      configurations.push_back({absl::StrCat(name, " tree auto"), drafter.get(), 0,
                                /*guided=*/false, /*trees=*/true, in_target});
    }
    drafters.push_back(std::move(drafter));
  }
  if (f.guidance_scale != 1.0f) {
    const size_t plain = configurations.size();
    for (size_t i = 0; i < plain; ++i) {
      Configuration guided = configurations[i];
      guided.name += kGuidedSuffix;
      guided.guided = true;
      configurations.push_back(guided);
    }
  }
  std::vector<int32_t> unconditional;
  if (f.guidance_scale != 1.0f) {
    ASSIGN_OR_RETURN(unconditional, UnconditionalPrompt(tokenizer, chat));
  }

  if (!f.json) {
    std::printf(
        "splitspec bench spec --workload %s: model %s, %zu requests, greedy, target %d thread(s), "
        "draft placement %s (%s), draft workers 1 thread, lookahead %d, cpu %s, %u hardware "
        "threads\n",
        f.workload.c_str(), f.model.c_str(), requests.size(), f.threads, f.draft_placement.c_str(),
        f.draft_placement == "auto" ? "lookup and ngram in the target worker, as serve runs them"
        : f.draft_placement == "target" ? "every drafter in the target worker"
                                        : "every drafter in a draft worker",
        f.lookahead, kernels::CpuIsaName(), std::thread::hardware_concurrency());
  }
  // One session per configuration for the whole workload: its workers, and the
  // costs its draft worker measures, carry from request to request as a server's do.
  int max_tokens = 1;
  for (const Prepared& p : prepared) max_tokens = std::max(max_tokens, p.request->max_tokens);
  std::vector<std::unique_ptr<SpecSession>> sessions;
  for (const Configuration& c : configurations) {
    ASSIGN_OR_RETURN(std::unique_ptr<SpecSession> session,
                     SpecSession::Start({.target = target.get(),
                                         .drafter = c.drafter,
                                         .drafter_in_target = c.in_target,
                                         .lookahead = f.lookahead,
                                         .k = c.k,
                                         .spec_cache = f.spec_cache,
                                         .cache_guard = true,
                                         .trees = c.trees,
                                         .compiler = compiler,
                                         .max_new_tokens = max_tokens}));
    sessions.push_back(std::move(session));
  }
  WorkloadTotals totals;
  std::vector<WorkloadTotals> pass_totals(f.rounds);
  for (int pass = 0; pass < f.rounds; ++pass) {
    for (size_t i = 0; i < prepared.size(); ++i) {
      const Prepared& p = prepared[i];
      // Per configuration, for the exactness check.
      std::vector<std::vector<int32_t>> outputs(configurations.size());
      // Request i of pass r starts at configuration i + r (mod their number): none
      // always runs first, right after another's work or the request's tokenization.
      for (size_t j = 0; j < configurations.size(); ++j) {
        const size_t c = (i + pass + j) % configurations.size();
        const Configuration& configuration = configurations[c];
        absl::StatusOr<SpecRunResult> run =
            sessions[c]->Generate({.prompt = p.prompt,
                                   .max_tokens = p.request->max_tokens,
                                   .stop_token_ids = stop_ids,
                                   .guidance_scale = configuration.guided ? f.guidance_scale : 1.0f,
                                   .negative_prompt = unconditional,
                                   .grammar = grammars[i]});
        if (!run.ok()) {
          return absl::Status(run.status().code(),
                              absl::StrCat(f.workload, ":", p.request->line, " (",
                                           configuration.name, "): ", run.status().message()));
        }
        const WorkloadRun measured{.tokens = run->tokens,
                                   .wall_seconds = run->wall_s,
                                   .verified = static_cast<int64_t>(run->stats.verified()),
                                   .accepted = static_cast<int64_t>(run->stats.accepted()),
                                   .steps = static_cast<int64_t>(run->stats.steps()),
                                   .cpu_seconds = run->cpu_s,
                                   .tree_steps = static_cast<int64_t>(run->stats.tree_steps())};
        totals.Add(p.request->category, configuration.name, measured);
        pass_totals[pass].Add(p.request->category, configuration.name, measured);
        outputs[c] = std::move(run->output);
      }
      RETURN_IF_ERROR(CheckSameAsTargetOnly(configurations, outputs,
                                            absl::StrCat(f.workload, ":", p.request->line)));
      std::fprintf(stderr, "bench spec: pass %d/%d: %zu/%zu requests done\n", pass + 1, f.rounds,
                   i + 1, prepared.size());
    }
  }
  // The tree configurations' draft side, over all categories: how many blocks were
  // trees, and how many were drafted past a tree in flight (pipelined trees).
  for (size_t c = 0; c < configurations.size(); ++c) {
    // A drafter in the target keeps its counters there (its draft engine is the target's).
    if (!configurations[c].trees || configurations[c].in_target) continue;
    const draft::DraftCounters counters = sessions[c]->Finish().counters;
    std::fprintf(
        stderr, "bench spec: %s: %llu blocks, %llu trees, %llu blocks drafted past a tree\n",
        configurations[c].name.c_str(), static_cast<unsigned long long>(counters.blocks_sent),
        static_cast<unsigned long long>(counters.tree_blocks_sent),
        static_cast<unsigned long long>(counters.blocks_past_trees));
  }
  std::vector<WorkloadRow> rows = totals.Rows();
  std::vector<std::vector<WorkloadRow>> pass_rows;
  for (const WorkloadTotals& pass : pass_totals) pass_rows.push_back(pass.Rows());
  SetRatioRanges(pass_rows, rows);
  if (f.json) {
    for (const WorkloadRow& row : rows) std::printf("%s\n", WorkloadRowJson(row).c_str());
    if (f.guidance_scale != 1.0f) {
      for (const GuidanceSummary& summary : GuidanceSummaries(rows))
        std::printf("%s\n", GuidanceSummaryJson(summary, f.guidance_scale).c_str());
    }
  } else {
    std::printf(
        "ratio = tok/s / target-only tok/s of the same category in this run (%d pass(es) over the "
        "workload; passes' ratios: the lowest and highest pass); accept = accepted / verified "
        "draft tokens; tok/step = tokens / target steps; cpu ms/tok = CPU time of all threads / "
        "tokens; trees = target steps that verified a tree / target steps\n\n",
        f.rounds);
    PrintTable(rows);
    if (f.guidance_scale != 1.0f) PrintGuidanceSummary(rows, f.guidance_scale);
  }
  return absl::OkStatus();
}

}  // namespace

int RunBenchSpecWorkload(const CommandArgs& args) {
  absl::StatusOr<WorkloadBenchFlags> flags = ParseWorkloadFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec bench spec: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status status = RunWorkload(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec bench spec: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace splitspec::tools
