// What `splitspec bench spec` measures, shared by its two modes: the built-in
// two-workload comparison (tools/bench_spec.cc) and `--workload FILE`
// (tools/bench_spec_workload.cc).
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
#include "proto/splitspec.pb.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/speculation_cache.h"
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

// One greedy generation through a fresh in-process cluster (coordinator, target
// and draft workers as threads over inproc://): `drafter` null decodes with the
// target alone; k = 0 lets the draft worker's adaptive controller choose k per
// block; spec_cache turns the draft worker's speculation cache on (one block in
// flight, the next pre-drafted for its likeliest outcomes); adaptive_window lets
// the draft worker choose the schedule per request (draft_worker/draft_engine.h).
// Wall time runs from submit to the last token (cluster start excluded).
// Generation stops at max_tokens or at one of `stop_token_ids`.
// With guidance_scale != 1 the request is guided (classifier-free guidance) with
// `negative_prompt` as its unconditional prompt. cache_guard: the draft engine's
// (draft_worker/draft_engine.h). With constraint.grammar the output is constrained
// (structured outputs) by the target, which compiles with constraint.compiler (REQUIRES:
// set then; share one across runs so a grammar compiles once). trees: the draft
// engine may send tree blocks (draft_worker/draft_engine.h "Trees"); false: chains only.
struct SpecRunConstraint {
  std::optional<grammar::GrammarSpec> grammar;
  std::shared_ptr<grammar::GrammarCompiler> compiler;
};
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
