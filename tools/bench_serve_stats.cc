#include "tools/bench_serve_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/json_string.h"

namespace splitspec::tools {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

void ServeTotals::AddRound(const RoundTiming& round) {
  ++sums_.rounds;
  sums_.tokens += round.tokens;
  sums_.seconds += round.wall_seconds;
}

void ServeTotals::AddRequest(const RequestTiming& request) {
  ++sums_.requests;
  ttft_.push_back(request.ttft_s);
  itl_.insert(itl_.end(), request.event_gaps_s.begin(), request.event_gaps_s.end());
  if (request.tokens >= 2) {
    tpot_.push_back((request.e2e_s - request.ttft_s) / static_cast<double>(request.tokens - 1));
  }
}

ServeSummary ServeTotals::Summary() const {
  ServeSummary s = sums_;
  s.tok_s = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0;
  s.ttft_p50_s = Percentile(ttft_, 50);
  s.ttft_p99_s = Percentile(ttft_, 99);
  s.itl_p50_s = Percentile(itl_, 50);
  s.itl_p99_s = Percentile(itl_, 99);
  s.tpot_p50_s = Percentile(tpot_, 50);
  s.tpot_p99_s = Percentile(tpot_, 99);
  return s;
}

double SpeedRatio(const ServeSummary& on, const ServeSummary& off) {
  return off.tok_s > 0 ? on.tok_s / off.tok_s : 0.0;
}

std::optional<std::string> DescribeOutputDifference(
    const std::string& label, const std::vector<int32_t>& on, const std::vector<int32_t>& off,
    const std::function<std::string(int32_t)>& piece) {
  const size_t common = std::min(on.size(), off.size());
  size_t i = 0;
  while (i < common && on[i] == off[i]) ++i;
  if (i == on.size() && i == off.size()) return std::nullopt;
  auto at = [&](const std::vector<int32_t>& ids) {
    return i < ids.size() ? absl::StrCat("token ", ids[i], " ", JsonQuote(piece(ids[i])))
                          : std::string("the end of the output");
  };
  std::string before;
  for (size_t j = i >= 8 ? i - 8 : 0; j < i; ++j) before += piece(on[j]);
  return absl::StrCat(label, ": greedy outputs with speculation on and off differ at output token ",
                      i, " (after ", JsonQuote(before), "): on has ", at(on), ", off has ", at(off),
                      " (", on.size(), " and ", off.size(), " tokens)");
}

std::string ServeSummaryJson(const ServeSummary& s) {
  return absl::StrFormat(
      "{\"rounds\":%d,\"requests\":%d,\"tokens\":%d,\"seconds\":%.4f,\"tok_s\":%.3f,"
      "\"ttft_p50_s\":%.5f,\"ttft_p99_s\":%.5f,\"itl_p50_s\":%.5f,\"itl_p99_s\":%.5f,"
      "\"tpot_p50_s\":%.5f,\"tpot_p99_s\":%.5f}",
      s.rounds, s.requests, s.tokens, s.seconds, s.tok_s, s.ttft_p50_s, s.ttft_p99_s, s.itl_p50_s,
      s.itl_p99_s, s.tpot_p50_s, s.tpot_p99_s);
}

}  // namespace splitspec::tools
