// What `splitspec bench spec` measures, shared by its modes: the built-in
// two-workload comparison (tools/bench_spec.cc), `--workload FILE`
// (tools/bench_spec_workload.cc: one SpecSession per configuration, kept across
// the workload's requests) and the simulated drafters (tools/bench_spec_sim.cc).
//
//   ASSIGN_OR_RETURN(SpecRunResult run, RunSpecGeneration(target, drafter, /*lookahead=*/2,
//                                                          /*k=*/0, prompt, 96, stop_ids));
#ifndef SPLITSPEC_TOOLS_BENCH_SPEC_H_
#define SPLITSPEC_TOOLS_BENCH_SPEC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "draft_worker/draft_engine.h"
#include "proto/splitspec.pb.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/speculation_cache.h"
#include "tools/cluster/in_process_cluster.h"
#include "tools/commands.h"

namespace splitspec::tools {

struct SpecRunResult {
  double tokens_per_s = 0;
  int tokens = 0;
  proto::SpecStats stats;
  double draft_busy_s = 0, target_busy_s = 0, wall_s = 0;
  double cpu_s = 0;             // CPU time of the whole process (all threads) during the generation
  std::vector<int32_t> output;  // the generated tokens
  spec::SpeculationCacheCounters cache;  // the draft worker's speculation cache (spec_cache)
};

// RunSpecGeneration's structured output: with grammar the target constrains the
// output and compiles it with compiler (REQUIRES: set then).
struct SpecRunConstraint {
  std::optional<grammar::GrammarSpec> grammar;
  std::shared_ptr<grammar::GrammarCompiler> compiler;
};

// The workers of one configuration, kept across generations as `serve` keeps its
// workers: an in-process cluster (coordinator, target and draft workers as threads
// over inproc://) whose draft worker carries its costs (draft seconds per token,
// the target's T(fed) line, block overhead, interference, cache hits: the
// speculation policy's inputs but acceptance, runtime/spec/spec_policy.h) from one
// request to the next. A policy's cold start is then paid by the session's first
// request, as a server pays it by its first, not by every request.
//
//   ASSIGN_OR_RETURN(auto session, SpecSession::Start({.target = t, .drafter = d}));
//   ASSIGN_OR_RETURN(SpecRunResult a, session->Generate({.prompt = p1, .max_tokens = 96}));
//   ASSIGN_OR_RETURN(SpecRunResult b, session->Generate({.prompt = p2, .max_tokens = 96}));
//   const draft::DraftCounters counters = session->Finish().counters;  // over both
//
// Sessions may share a target and a drafter as long as their generations do not
// overlap (a session between generations runs no forward and no Propose).
// Thread model: one thread calls Generate and Finish; the services run on their own.
struct SpecSessionOptions {
  model::Transformer* target = nullptr;  // required; outlives the session
  spec::Drafter* drafter = nullptr;      // null: the target decodes alone; outlives the session
  // The drafter runs inside the target worker (target_worker/local_drafts.h, as `serve`
  // runs lookup and ngram by default) instead of in a draft worker. Model-free drafters only.
  bool drafter_in_target = false;
  int lookahead = 2;  // blocks in flight per request (1: sequential)
  // Draft tokens per block; 0: the speculation policy chooses k (and off) per block.
  int k = 0;
  bool spec_cache = false;       // the draft worker's speculation cache
  bool adaptive_window = false;  // the policy chooses the schedule (draft_worker/draft_engine.h)
  bool cache_guard = true;       // the draft engine's cache guard
  // The draft engine may send tree blocks (draft_worker/draft_engine.h "Trees");
  // false: chains only.
  bool trees = false;
  // Compiles the grammars of constrained requests; required for them. Share one
  // across sessions so that a grammar compiles once.
  std::shared_ptr<grammar::GrammarCompiler> compiler = nullptr;
  int max_new_tokens = 0;  // the router's bound on max_tokens; 0: its default
};

// One greedy generation (temperature 0, greedy verification). Generation stops at
// max_tokens or at one of stop_token_ids. With guidance_scale != 1 the request is
// guided (classifier-free guidance) with negative_prompt as its unconditional
// prompt; with grammar its output is constrained (structured outputs).
struct SpecRequest {
  std::vector<int32_t> prompt = {};
  int max_tokens = 0;
  std::vector<int32_t> stop_token_ids = {};
  float guidance_scale = 1.0f;
  std::vector<int32_t> negative_prompt = {};
  std::optional<grammar::GrammarSpec> grammar = std::nullopt;
};

class SpecSession {
 public:
  // Starts the services and waits until the workers have registered.
  // Errors: InvalidArgument (no target); InProcessCluster::Start's.
  static absl::StatusOr<std::unique_ptr<SpecSession>> Start(const SpecSessionOptions& options);
  ~SpecSession();

  // Runs one request to its end. Wall time runs from submit to the last token;
  // Generate returns once the draft worker has released the request too (no
  // Propose of this session then overlaps another's). SpecRunResult.cache is left
  // empty (see Finish). Errors: the client's; Internal with the generation's error;
  // FailedPrecondition after Finish; InProcessCluster::WaitForDraftReleases's.
  absl::StatusOr<SpecRunResult> Generate(const SpecRequest& request);

  // Stops the draft worker and returns its counters and speculation cache totals
  // over every generation of the session (zero without a drafter). Call once,
  // after the last Generate.
  struct Totals {
    draft::DraftCounters counters;
    spec::SpeculationCacheCounters cache;
  };
  Totals Finish();

 private:
  SpecSession() = default;

  std::unique_ptr<InProcessCluster> cluster_;
  std::unique_ptr<net::RequestClient> client_;
  bool speculative_ = false;
  int k_ = 0;
  uint64_t generated_ = 0;  // requests run to their end
  bool finished_ = false;
};

// One greedy generation through a fresh session (SpecSession: cluster start
// excluded from the wall time), with lookahead, k (0: the policy), spec_cache,
// adaptive_window, cache_guard and trees as in SpecSessionOptions and the rest as in
// SpecRequest; the result's `cache` is filled.
absl::StatusOr<SpecRunResult> RunSpecGeneration(
    model::Transformer* target, spec::Drafter* drafter, int lookahead, int k,
    const std::vector<int32_t>& prompt, int max_tokens, const std::vector<int32_t>& stop_token_ids,
    bool spec_cache = false, bool adaptive_window = false, float guidance_scale = 1.0f,
    const std::vector<int32_t>& negative_prompt = {}, bool cache_guard = true,
    const SpecRunConstraint& constraint = {}, bool trees = false);

// `splitspec bench spec --workload FILE ...` (argv without "bench spec").
int RunBenchSpecWorkload(const CommandArgs& args);

// True when `args` ask for the simulated-drafter bench: --sim-grid, or a sim:
// drafter in --drafters.
bool WantsSimBench(const CommandArgs& args);
// `splitspec bench spec --sim-grid | --drafters 'sim:alpha=A,ratio=C' ...`
// (tools/bench_spec_sim.cc).
int RunBenchSpecSim(const CommandArgs& args);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_BENCH_SPEC_H_
