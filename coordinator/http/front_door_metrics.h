// FrontDoorMetrics: what the HTTP front door counts, rendered as Prometheus
// text (exposition format 0.0.4) for GET /metrics. Names carry the
// `splitspec_` prefix and follow vLLM's where one exists:
//
//   splitspec_requests_total{outcome}            counter  generation requests by outcome:
//                                                         stop, length, cancelled (client went
//                                                         away), rejected (4xx, 429), failed (5xx,
//                                                         worker error)
//   splitspec_http_errors_total{code}            counter  error responses by HTTP status
//   splitspec_num_requests_running               gauge    generation requests in flight here
//   splitspec_prompt_tokens_total                counter
//   splitspec_generation_tokens_total            counter  tokens streamed back to clients
//   splitspec_time_to_first_token_seconds        histogram  request received -> first token
//   splitspec_inter_token_latency_seconds        histogram  per token: gap since the previous token
//                                                         (tokens of one accepted block arrive
//                                                         together: the first gets the gap, the
//                                                         rest 0)
//   splitspec_e2e_request_latency_seconds        histogram  request received -> finished
//   splitspec_spec_decode_num_draft_tokens_total / _num_verified_tokens_total /
//   splitspec_spec_decode_num_accepted_tokens_total / _num_steps_total   counters from SpecStats
//   splitspec_spec_decode_acceptance_rate        gauge    accepted / verified over all finished
//   requests splitspec_spec_decode_num_verified_tokens_per_pos{position} /
//   _num_accepted_tokens_per_pos{position}
//                                                counters: draft tokens at block position i (0 =
//                                                first)
//   splitspec_num_requests_waiting               gauge    the coordinator's queue depth (admitted,
//   not placed) splitspec_coordinator_requests_running       gauge    requests placed on target
//   groups splitspec_coordinator_up                     gauge    1 if the coordinator answered its
//   status splitspec_worker_alive{worker_id,worker_name,role,state}  gauge  per worker: 1 if alive
//   splitspec_worker_active_requests{worker_id,...}, splitspec_worker_queued_blocks{...},
//   splitspec_worker_step_seconds{...}           gauges from the workers' load reports (heartbeats)
//   splitspec_worker_cuda_graph_capture_fallbacks{...}  gauge  target worker on CUDA: calls
//                                                whose graph capture failed and ran eagerly
//   splitspec_worker_restarts_total{worker_name,role}  counter  new processes (pids) that
//                                                registered under the worker's name after its
//                                                first: restarts by a supervisor (splitspec serve)
//
// Thread safety: thread-safe (one internal mutex).
#ifndef SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_METRICS_H_
#define SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/splitspec.pb.h"
#include "runtime/base/mutex.h"

namespace splitspec::coordinator::http {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // The # HELP / # TYPE lines, the _bucket series (le="+Inf" included), _sum and _count.
  void Render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

enum class RequestOutcome { kStop, kLength, kCancelled, kRejected, kFailed };

class FrontDoorMetrics {
 public:
  FrontDoorMetrics();

  void RecordOutcome(RequestOutcome outcome);
  void RecordHttpError(int status);
  void AddRunning(int delta);
  int64_t running() const;
  void AddPromptTokens(int tokens);
  // A request with classifier-free guidance was submitted.
  void RecordGuided();
  // `tokens` arrived together, `gap_seconds` after the previous ones of their
  // request (or after the request arrived, for the first: that is the TTFT).
  void ObserveTokens(int tokens, double gap_seconds, bool first);
  void ObserveFinished(double e2e_seconds, const proto::SpecStats& stats);

  // The exposition text. `status` (nullable) adds the per-worker series and
  // splitspec_coordinator_up 1; without it, splitspec_coordinator_up 0.
  std::string Render(const proto::StatusReply* status) const;

 private:
  mutable Mutex mu_;
  // State below is protected by mu_.
  std::map<RequestOutcome, uint64_t> outcomes_ ABSL_GUARDED_BY(mu_);
  std::map<int, uint64_t> http_errors_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t guided_requests_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t guidance_forward_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  proto::SpecStats spec_ ABSL_GUARDED_BY(mu_);
  Histogram ttft_ ABSL_GUARDED_BY(mu_);
  Histogram inter_token_ ABSL_GUARDED_BY(mu_);
  Histogram e2e_ ABSL_GUARDED_BY(mu_);
};

// A non-integer sample value: the shortest decimal that reads back as the same
// double (std::to_chars), so no digit is lost ("0.1", "1234567.5", "1e+300");
// NaN, +Inf, -Inf as Prometheus spells them. Counters and integer gauges are
// printed as integers, not through this.
std::string PrometheusNumber(double value);

// `value` escaped for a Prometheus label value (backslash, quote, newline).
std::string PrometheusLabelValue(const std::string& value);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_METRICS_H_
