// `splitspec plan --alpha A --cost-ratio C [--k K] [--json]`: the analytic model
// of runtime/spec/analytic_model.h for sequential and overlapped draft/verify.
//
// Without --k, "k" is the sequential optimum and "overlapped_k" the overlapped
// one; with --k both are K. JSON (one object on one line):
//   {"alpha":..,"cost_ratio":..,"k":..,"expected_tokens":..,"speedup":..,
//    "optimal_k":..,"optimal_speedup":..,"overlapped_k":..,
//    "overlapped_expected_tokens":..,"overlapped_speedup":..,
//    "overlapped_optimal_k":..,"overlapped_optimal_speedup":..}
// Otherwise a table over k = 1..10 (and K) with the formulas it uses.
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
  ASSIGN_OR_RETURN(int64_t k, cli.GetInt("k", 0));
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
  return in;
}

std::string Number(double x) { return absl::StrFormat("%.6g", x); }

void PrintJson(const PlanInputs& in) {
  using spec::Schedule;
  const spec::PlanChoice best = spec::OptimalK(in.alpha, in.cost_ratio, Schedule::kSequential);
  const spec::PlanChoice best_overlapped =
      spec::OptimalK(in.alpha, in.cost_ratio, Schedule::kOverlapped);
  const int k = in.k > 0 ? in.k : best.k;
  const int k_overlapped = in.k > 0 ? in.k : best_overlapped.k;
  std::printf(
      "{\"alpha\":%s,\"cost_ratio\":%s,\"k\":%d,\"expected_tokens\":%s,\"speedup\":%s,\"optimal_"
      "k\":%d,"
      "\"optimal_speedup\":%s,\"overlapped_k\":%d,\"overlapped_expected_tokens\":%s,\"overlapped_"
      "speedup\":%s,"
      "\"overlapped_optimal_k\":%d,\"overlapped_optimal_speedup\":%s}\n",
      Number(in.alpha).c_str(), Number(in.cost_ratio).c_str(), k,
      Number(spec::ExpectedTokensPerStep(in.alpha, k)).c_str(),
      Number(spec::Speedup(in.alpha, in.cost_ratio, k, Schedule::kSequential)).c_str(), best.k,
      Number(best.speedup).c_str(), k_overlapped,
      Number(spec::ExpectedTokensPerStep(in.alpha, k_overlapped)).c_str(),
      Number(spec::Speedup(in.alpha, in.cost_ratio, k_overlapped, Schedule::kOverlapped)).c_str(),
      best_overlapped.k, Number(best_overlapped.speedup).c_str());
}

void PrintRow(const PlanInputs& in, int k) {
  std::printf("%4d %8.3f %10.3fx %11.3fx%s\n", k, spec::ExpectedTokensPerStep(in.alpha, k),
              spec::Speedup(in.alpha, in.cost_ratio, k, spec::Schedule::kSequential),
              spec::Speedup(in.alpha, in.cost_ratio, k, spec::Schedule::kOverlapped),
              k == in.k ? "  <- --k" : "");
}

void PrintTable(const PlanInputs& in) {
  using spec::Schedule;
  std::printf("alpha = %s, C = T_target / T_draft = %s\n", Number(in.alpha).c_str(),
              Number(in.cost_ratio).c_str());
  std::printf(
      "E[N] = (1 - alpha^(k+1)) / (1 - alpha); sequential S = E[N] / (1 + k/C); "
      "overlapped S = E[N] / max(1, k/C)\n\n");
  std::printf("%4s %8s %11s %12s\n", "k", "E[N]", "sequential", "overlapped");
  for (int k = 1; k <= kTableMaxK; ++k) PrintRow(in, k);
  if (in.k > kTableMaxK) PrintRow(in, in.k);
  const spec::PlanChoice best = spec::OptimalK(in.alpha, in.cost_ratio, Schedule::kSequential);
  const spec::PlanChoice best_overlapped =
      spec::OptimalK(in.alpha, in.cost_ratio, Schedule::kOverlapped);
  std::printf("\noptimal k in 1..%d: sequential k = %d -> %.3fx; overlapped k = %d -> %.3fx\n",
              spec::kPlanMaxK, best.k, best.speedup, best_overlapped.k, best_overlapped.speedup);
  if (best.speedup < 1.0) std::printf("speculation loses at every k: decode target-only\n");
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
