// The statistics of `splitspec bench serve` (tools/bench_serve.cc): what one
// streamed request measured, the per-(concurrency, speculation on/off)
// aggregate, the on/off ratio, and the check that greedy outputs with
// speculation on and off are identical.
//
//   ServeTotals on;
//   on.AddRound({.tokens = 400, .wall_seconds = 5.0});
//   on.AddRequest({.ttft_s = 0.2, .event_gaps_s = {0.05, 0.04}, .tokens = 3, .e2e_s = 0.3});
//   ServeSummary s = on.Summary();       // tok/s, TTFT / ITL / TPOT p50 and p99
//   double ratio = SpeedRatio(s, off.Summary());
//
// Definitions (as the client sees the stream):
//   tok/s  completion tokens of a round / the round's wall time (first request
//          sent to last stream closed), summed over the rounds: an aggregate rate
//          over every client of that concurrency.
//   TTFT   request sent to the first event carrying text.
//   ITL    the gaps between consecutive events carrying text (vLLM's "ITL"): with
//          speculation an event may carry several tokens, so ITL shows the pauses
//          a reader sees, and TPOT the cost per token.
//   TPOT   (end - TTFT) / (completion tokens - 1), per request of at least 2 tokens.
//   Percentiles interpolate linearly between the closest ranks (numpy's default).
//
// Thread safety: pure functions; ServeTotals is thread-compatible.
#ifndef SPLITSPEC_TOOLS_BENCH_SERVE_STATS_H_
#define SPLITSPEC_TOOLS_BENCH_SERVE_STATS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace splitspec::tools {

// The p-th percentile (p in [0, 100]) of `values`, interpolated linearly between
// the closest ranks; 0 for an empty sample.
double Percentile(std::vector<double> values, double p);

// One streamed request, as the client timed it.
struct RequestTiming {
  double ttft_s = 0.0;               // sent to the first text event
  std::vector<double> event_gaps_s;  // between consecutive text events
  int64_t tokens = 0;                // completion tokens (the response's usage)
  double e2e_s = 0.0;                // sent to the end of the stream
};

// One round: the whole workload at one concurrency, with speculation on or off.
struct RoundTiming {
  int64_t tokens = 0;
  double wall_seconds = 0.0;
};

struct ServeSummary {
  int rounds = 0;
  int requests = 0;
  int64_t tokens = 0;
  double seconds = 0.0;
  double tok_s = 0.0;  // tokens / seconds; 0 without time
  double ttft_p50_s = 0.0, ttft_p99_s = 0.0;
  double itl_p50_s = 0.0, itl_p99_s = 0.0;
  double tpot_p50_s = 0.0, tpot_p99_s = 0.0;
};

class ServeTotals {
 public:
  void AddRound(const RoundTiming& round);
  void AddRequest(const RequestTiming& request);
  ServeSummary Summary() const;

 private:
  ServeSummary sums_;
  std::vector<double> ttft_, itl_, tpot_;
};

// on.tok_s / off.tok_s; 0 when off has no rate.
double SpeedRatio(const ServeSummary& on, const ServeSummary& off);

// Why two greedy outputs of request `label` differ, naming the first differing
// token (its index and both pieces, quoted as JSON strings; `piece` turns a token
// id into its text), or nullopt when they are identical. When one output is a
// prefix of the other, the shorter one's end is the difference.
std::optional<std::string> DescribeOutputDifference(
    const std::string& label, const std::vector<int32_t>& on, const std::vector<int32_t>& off,
    const std::function<std::string(int32_t)>& piece);

// {"rounds":..,"requests":..,"tokens":..,"seconds":..,"tok_s":..,"ttft_p50_s":..,
//  "ttft_p99_s":..,"itl_p50_s":..,"itl_p99_s":..,"tpot_p50_s":..,"tpot_p99_s":..}
std::string ServeSummaryJson(const ServeSummary& summary);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_BENCH_SERVE_STATS_H_
