// `splitspec plan --alpha A --cost-ratio C [--k K] [--verify-slope S]
//                 [--cache-hit-rate H] [--block-overhead O] [--json]`: the analytic model of
// runtime/spec/analytic_model.h for sequential and overlapped draft/verify.
//
// Four figures per k: sequential; the overlapped bound (the next block's drafting
// always hidden, E[N] / max(1, k/C)); the overlapped pipeline model, which charges
// the forfeited bonus and the refill after a rejection; and overlapped with the
// speculation cache, a fraction H of whose results find the next block pre-drafted
// (each result waiting half a draft token for the pre-draft forward in progress).
// A verify cost growing by S per draft is charged in every figure; a block overhead O
// (trips and turnaround, in target steps) in the sequential and pipeline figures.
// Without --k, "k" is the sequential optimum, "overlapped_k" the bound's,
// "overlapped_refill_k" the pipeline model's and "cached_k" the cache's; with --k all
// are K. JSON (one line):
//   {"alpha":..,"cost_ratio":..,"k":..,"expected_tokens":..,"speedup":..,
//    "optimal_k":..,"optimal_speedup":..,"overlapped_k":..,
//    "overlapped_expected_tokens":..,"overlapped_speedup":..,
//    "overlapped_optimal_k":..,"overlapped_optimal_speedup":..,
//    "verify_slope":..,"cache_hit_rate":..,"overlapped_refill_k":..,
//    "overlapped_refill_tokens":..,"overlapped_refill_speedup":..,
//    "overlapped_refill_optimal_k":..,"overlapped_refill_optimal_speedup":..,
//    "cached_k":..,"cached_speedup":..,"cached_optimal_k":..,"cached_optimal_speedup":..,
//    "block_overhead":..}
// Otherwise a table over k = 1..10 (and K) with the formulas it uses.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/analytic_model.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

constexpr int kTableMaxK = 10;
constexpr int kMaxRequestedK = 100;

struct PlanInputs {
  double alpha = 0.0;
  double cost_ratio = 0.0;
  int k = 0;  // 0: not given
  double verify_slope = 0.0;
  double cache_hit_rate = 0.0;
  double block_overhead = 0.0;
  bool json = false;
};

absl::StatusOr<PlanInputs> ParsePlanInputs(const CommandArgs& args) {
  ASSIGN_OR_RETURN(CliArgs cli, CliArgs::Parse(args, PlanFlagTable()));
  if (!cli.Has("alpha"))
    return absl::InvalidArgumentError("--alpha is required (acceptance rate in [0, 1])");
  if (!cli.Has("cost-ratio")) {
    return absl::InvalidArgumentError("--cost-ratio is required (C = T_target / T_draft, > 0)");
  }
  PlanInputs in;
  ASSIGN_OR_RETURN(in.alpha, cli.GetDouble("alpha", 0.0));
  ASSIGN_OR_RETURN(in.cost_ratio, cli.GetDouble("cost-ratio", 0.0));
  ASSIGN_OR_RETURN(int k, cli.GetInt<int>("k", 0));
  ASSIGN_OR_RETURN(in.verify_slope, cli.GetDouble("verify-slope", 0.0));
  ASSIGN_OR_RETURN(in.cache_hit_rate, cli.GetDouble("cache-hit-rate", 0.0));
  ASSIGN_OR_RETURN(in.block_overhead, cli.GetDouble("block-overhead", 0.0));
  in.json = cli.Has("json");
  if (!(in.alpha >= 0.0 && in.alpha <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--alpha must be in [0, 1], got ", cli.GetString("alpha", "")));
  }
  if (!spec::ValidateModelInputs(in.alpha, in.cost_ratio).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cost-ratio must be finite and > 0, got ", cli.GetString("cost-ratio", "")));
  }
  if (cli.Has("k") && (k < 1 || k > kMaxRequestedK)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--k must be in [1, ", kMaxRequestedK, "], got ", k));
  }
  in.k = static_cast<int>(k);
  if (!(in.verify_slope >= 0.0) || !std::isfinite(in.verify_slope)) {
    return absl::InvalidArgumentError(absl::StrCat("--verify-slope must be finite and >= 0, got ",
                                                   cli.GetString("verify-slope", "")));
  }
  if (!(in.cache_hit_rate >= 0.0 && in.cache_hit_rate <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("--cache-hit-rate must be in [0, 1], got ",
                                                   cli.GetString("cache-hit-rate", "")));
  }
  if (!(in.block_overhead >= 0.0) || !std::isfinite(in.block_overhead)) {
    return absl::InvalidArgumentError(absl::StrCat("--block-overhead must be finite and >= 0, got ",
                                                   cli.GetString("block-overhead", "")));
  }
  return in;
}

std::string Number(double x) { return absl::StrFormat("%.6g", x); }

spec::PipelineModelInputs Pipeline(const PlanInputs& in, int k) {
  return {.alpha = in.alpha,
          .cost_ratio = in.cost_ratio,
          .k = k,
          .verify_slope = in.verify_slope,
          .cache_hit_rate = in.cache_hit_rate,
          .result_wait = 0.5 / in.cost_ratio,  // the cache's pre-draft forward in progress
          .block_overhead = in.block_overhead};
}

// The sequential figure is the pipeline model's (the classic one plus the block
// overhead); the overlapped bound is the classic one.
double Classic(const PlanInputs& in, int k, spec::Schedule schedule) {
  if (schedule == spec::Schedule::kSequential)
    return spec::PipelineSpeedup(Pipeline(in, k), spec::PipelineMode::kSequential);
  return spec::SpeedupWithVerifyCost(in.alpha, in.cost_ratio, k, schedule, in.verify_slope);
}

spec::PlanChoice ClassicOptimum(const PlanInputs& in, spec::Schedule schedule) {
  if (schedule == spec::Schedule::kSequential)
    return spec::PipelineOptimalK(Pipeline(in, 1), spec::PipelineMode::kSequential, 1,
                                  spec::kPlanMaxK);
  return spec::OptimalKWithVerifyCost(in.alpha, in.cost_ratio, schedule, in.verify_slope, 1,
                                      spec::kPlanMaxK);
}

spec::PlanChoice PipelineOptimum(const PlanInputs& in, spec::PipelineMode mode) {
  return spec::PipelineOptimalK(Pipeline(in, 1), mode, 1, spec::kPlanMaxK);
}

void PrintJson(const PlanInputs& in) {
  using spec::PipelineMode;
  using spec::Schedule;
  const spec::PlanChoice best = ClassicOptimum(in, Schedule::kSequential);
  const spec::PlanChoice best_overlapped = ClassicOptimum(in, Schedule::kOverlapped);
  const spec::PlanChoice best_refill = PipelineOptimum(in, PipelineMode::kOverlapped);
  const spec::PlanChoice best_cached = PipelineOptimum(in, PipelineMode::kOverlappedCache);
  const int k = in.k > 0 ? in.k : best.k;
  const int k_overlapped = in.k > 0 ? in.k : best_overlapped.k;
  const int k_refill = in.k > 0 ? in.k : best_refill.k;
  const int k_cached = in.k > 0 ? in.k : best_cached.k;
  std::printf(
      "{\"alpha\":%s,\"cost_ratio\":%s,\"k\":%d,\"expected_tokens\":%s,\"speedup\":%s,\"optimal_"
      "k\":%d,"
      "\"optimal_speedup\":%s,\"overlapped_k\":%d,\"overlapped_expected_tokens\":%s,\"overlapped_"
      "speedup\":%s,"
      "\"overlapped_optimal_k\":%d,\"overlapped_optimal_speedup\":%s,\"verify_slope\":%s,"
      "\"cache_hit_rate\":%s,\"overlapped_refill_k\":%d,\"overlapped_refill_tokens\":%s,"
      "\"overlapped_refill_speedup\":%s,\"overlapped_refill_optimal_k\":%d,"
      "\"overlapped_refill_optimal_speedup\":%s,\"cached_k\":%d,\"cached_speedup\":%s,"
      "\"cached_optimal_k\":%d,\"cached_optimal_speedup\":%s,\"block_overhead\":%s}\n",
      Number(in.alpha).c_str(), Number(in.cost_ratio).c_str(), k,
      Number(spec::ExpectedTokensPerStep(in.alpha, k)).c_str(),
      Number(Classic(in, k, Schedule::kSequential)).c_str(), best.k, Number(best.speedup).c_str(),
      k_overlapped, Number(spec::ExpectedTokensPerStep(in.alpha, k_overlapped)).c_str(),
      Number(Classic(in, k_overlapped, Schedule::kOverlapped)).c_str(), best_overlapped.k,
      Number(best_overlapped.speedup).c_str(), Number(in.verify_slope).c_str(),
      Number(in.cache_hit_rate).c_str(), k_refill,
      Number(spec::PipelineTokensPerBlock(Pipeline(in, k_refill), PipelineMode::kOverlapped))
          .c_str(),
      Number(spec::PipelineSpeedup(Pipeline(in, k_refill), PipelineMode::kOverlapped)).c_str(),
      best_refill.k, Number(best_refill.speedup).c_str(), k_cached,
      Number(spec::PipelineSpeedup(Pipeline(in, k_cached), PipelineMode::kOverlappedCache)).c_str(),
      best_cached.k, Number(best_cached.speedup).c_str(), Number(in.block_overhead).c_str());
}

void PrintRow(const PlanInputs& in, int k) {
  std::printf("%4d %8.3f %10.3fx %11.3fx %11.3fx %11.3fx%s\n", k,
              spec::ExpectedTokensPerStep(in.alpha, k), Classic(in, k, spec::Schedule::kSequential),
              Classic(in, k, spec::Schedule::kOverlapped),
              spec::PipelineSpeedup(Pipeline(in, k), spec::PipelineMode::kOverlapped),
              spec::PipelineSpeedup(Pipeline(in, k), spec::PipelineMode::kOverlappedCache),
              k == in.k ? "  <- --k" : "");
}

void PrintTable(const PlanInputs& in) {
  using spec::PipelineMode;
  using spec::Schedule;
  std::printf(
      "alpha = %s, C = T_target / T_draft = %s, verify slope S = %s, cache hit rate H = %s, "
      "block overhead O = %s\n",
      Number(in.alpha).c_str(), Number(in.cost_ratio).c_str(), Number(in.verify_slope).c_str(),
      Number(in.cache_hit_rate).c_str(), Number(in.block_overhead).c_str());
  std::printf(
      "E[N] = (1 - alpha^(k+1)) / (1 - alpha); V = 1 + S k; sequential = E[N] / (V + k/C + O); "
      "bound = E[N] / max(V, k/C)\n"
      "overlapped (lookahead 2, draft hidden): (E[N] - alpha^k) / (alpha^k (V - S) + "
      "(1 - alpha^k) (V + k/C + O)); draft-bound (k/C > V - S): E[N] / (2 k/C + O)\n"
      "ovl+cache (one block in flight, hits pre-drafted): E[N] / (V + 0.5/C + O + (1 - H) k/C + "
      "H max(0, k/C - V)) (0.5/C: a result waits for the pre-draft forward in progress)\n\n");
  std::printf("%4s %8s %11s %12s %12s %12s\n", "k", "E[N]", "sequential", "ovl bound", "overlapped",
              "ovl+cache");
  for (int k = 1; k <= kTableMaxK; ++k) PrintRow(in, k);
  if (in.k > kTableMaxK) PrintRow(in, in.k);
  const spec::PlanChoice best = ClassicOptimum(in, Schedule::kSequential);
  const spec::PlanChoice best_overlapped = ClassicOptimum(in, Schedule::kOverlapped);
  const spec::PlanChoice best_refill = PipelineOptimum(in, PipelineMode::kOverlapped);
  const spec::PlanChoice best_cached = PipelineOptimum(in, PipelineMode::kOverlappedCache);
  std::printf(
      "\noptimal k in 1..%d: sequential k = %d -> %.3fx; overlapped k = %d -> %.3fx (bound), "
      "k = %d -> %.3fx (pipeline model); ovl+cache k = %d -> %.3fx\n",
      spec::kPlanMaxK, best.k, best.speedup, best_overlapped.k, best_overlapped.speedup,
      best_refill.k, best_refill.speedup, best_cached.k, best_cached.speedup);
  if (std::max({best.speedup, best_refill.speedup, best_cached.speedup}) < 1.0)
    std::printf("speculation loses at every k: decode target-only\n");
}

}  // namespace

int RunPlanCommand(const CommandArgs& args) {
  const absl::StatusOr<PlanInputs> inputs = ParsePlanInputs(args);
  if (!inputs.ok()) {
    std::fprintf(stderr, "splitspec plan: %s\n", std::string(inputs.status().message()).c_str());
    return 2;
  }
  if (inputs->json) {
    PrintJson(*inputs);
  } else {
    PrintTable(*inputs);
  }
  return 0;
}

}  // namespace splitspec::tools
