#include "coordinator/http/front_door_metrics.h"

#include <charconv>
#include <cmath>
#include <compare>
#include <concepts>
#include <set>

#include "absl/strings/str_cat.h"

namespace splitspec::coordinator::http {
namespace {

std::vector<double> LatencyBounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
          0.4,   0.5,    0.75,  1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
}

void Header(const std::string& name, const std::string& type, const std::string& help,
            std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

// A counter or an integer gauge: printed as the integer it is, exact at any size
// (a double printed through absl::StrCat keeps 6 digits: 1234567 read 1.23457e+06).
template <std::integral Int>
void Sample(const std::string& name, Int value, std::string* out) {
  absl::StrAppend(out, name, " ", value, "\n");
}

// A gauge that is not an integer (a rate, seconds).
void SampleReal(const std::string& name, double value, std::string* out) {
  absl::StrAppend(out, name, " ", PrometheusNumber(value), "\n");
}

const char* OutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kStop:
      return "stop";
    case RequestOutcome::kLength:
      return "length";
    case RequestOutcome::kCancelled:
      return "cancelled";
    case RequestOutcome::kRejected:
      return "rejected";
    case RequestOutcome::kFailed:
      return "failed";
  }
  return "failed";
}

const char* RoleName(proto::Role role) {
  switch (role) {
    case proto::ROLE_TARGET_WORKER:
      return "target";
    case proto::ROLE_DRAFT_WORKER:
      return "draft";
    default:
      return "other";
  }
}

const char* StateName(proto::MemberState state) {
  switch (state) {
    case proto::MEMBER_STATE_ALIVE:
      return "alive";
    case proto::MEMBER_STATE_SUSPECT:
      return "suspect";
    case proto::MEMBER_STATE_DEAD:
      return "dead";
    case proto::MEMBER_STATE_LEFT:
      return "left";
    case proto::MEMBER_STATE_DRAINING:
      return "draining";
    default:
      return "unknown";
  }
}

void AddPerPosition(const google::protobuf::RepeatedField<uint64_t>& add,
                    google::protobuf::RepeatedField<uint64_t>* total) {
  while (total->size() < add.size()) total->Add(0);
  for (int i = 0; i < add.size(); ++i) total->Set(i, total->Get(i) + add.Get(i));
}

void RenderPerPosition(const char* name, const char* help,
                       const google::protobuf::RepeatedField<uint64_t>& counts, std::string* out) {
  Header(name, "counter", help, out);
  for (int i = 0; i < counts.size(); ++i)
    absl::StrAppend(out, name, "{position=\"", i, "\"} ", counts.Get(i), "\n");
}

void RenderWorkers(const proto::StatusReply& status, std::string* out) {
  struct Series {
    const char* name;
    const char* help;
    std::string (*value)(const proto::MemberStatus&);  // the sample's text
  };
  const Series series[] = {
      {"splitspec_worker_alive", "1 if the worker is alive in the coordinator's membership table",
       [](const proto::MemberStatus& m) {
         return std::string(m.state() == proto::MEMBER_STATE_ALIVE ? "1" : "0");
       }},
      {"splitspec_worker_active_requests", "Requests the worker reported in its last heartbeat",
       [](const proto::MemberStatus& m) { return absl::StrCat(m.load().active_requests()); }},
      {"splitspec_worker_queued_blocks", "Draft blocks queued at the worker (last heartbeat)",
       [](const proto::MemberStatus& m) { return absl::StrCat(m.load().queued_blocks()); }},
      {"splitspec_worker_step_seconds",
       "Mean time of the worker's recent forward steps (last heartbeat)",
       [](const proto::MemberStatus& m) {
         return PrometheusNumber(m.load().mean_step_ms() / 1000.0);
       }},
      {"splitspec_worker_spec_cache_lookups",
       "Draft worker: verification results looked up in its speculation cache (last heartbeat)",
       [](const proto::MemberStatus& m) { return absl::StrCat(m.load().spec_cache_lookups()); }},
      {"splitspec_worker_spec_cache_hits",
       "Draft worker: speculation cache hits, partial ones included (last heartbeat)",
       [](const proto::MemberStatus& m) { return absl::StrCat(m.load().spec_cache_hits()); }},
      {"splitspec_worker_spec_cache_partial_hits",
       "Draft worker: speculation cache hits with part of the block pre-drafted (last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().spec_cache_partial_hits());
       }},
      {"splitspec_worker_spec_cache_drafted_tokens",
       "Draft worker: tokens pre-drafted for speculation cache branches (last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().spec_cache_drafted_tokens());
       }},
      {"splitspec_worker_spec_cache_unplanned_blocks",
       "Draft worker: blocks its cache guard left without pre-drafting, where pre-drafting "
       "measurably cost more than it saved (last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().spec_cache_unplanned_blocks());
       }},
      {"splitspec_worker_cuda_graph_capture_fallbacks",
       "Target worker: forward calls whose CUDA graph capture failed and that ran eagerly "
       "instead, since start (last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().cuda_graph_capture_fallbacks());
       }},
      {"splitspec_worker_kv_cache_used_bytes",
       "Bytes the worker's KV caches hold (last heartbeat; per process, also per TP rank)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().kv_cache_used_bytes());
       }},
      {"splitspec_worker_kv_cache_bytes_per_position",
       "Bytes one position (token) takes in the worker's KV caches, all layers, K and V, as "
       "--kv-cache-type stores them (f16 or q8_0; last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().kv_cache_bytes_per_position());
       }},
      {"splitspec_worker_kv_cache_budget_bytes",
       "The worker's KV-cache budget, --kv-cache-memory (0: unlimited; last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().kv_cache_budget_bytes());
       }},
      {"splitspec_worker_kv_cache_waiting_requests",
       "Requests waiting at the worker for KV-cache room (last heartbeat)",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().kv_cache_waiting_requests());
       }},
      {"splitspec_worker_kv_cache_waits",
       "Requests that waited for KV-cache room before starting, since the worker started",
       [](const proto::MemberStatus& m) { return absl::StrCat(m.load().kv_cache_waits()); }},
      {"splitspec_worker_kv_cache_preemptions",
       "Running requests evicted to free KV-cache room (recomputed when re-admitted), since the "
       "worker started",
       [](const proto::MemberStatus& m) {
         return absl::StrCat(m.load().kv_cache_preemptions());
       }},
  };
  for (const Series& s : series) {
    Header(s.name, "gauge", s.help, out);
    for (const proto::MemberStatus& member : status.members()) {
      absl::StrAppend(out, s.name, "{worker_id=\"", member.worker_id(), "\",worker_name=\"",
                      PrometheusLabelValue(member.worker_name()), "\",role=\"",
                      RoleName(member.role()), "\",state=\"", StateName(member.state()), "\"} ",
                      s.value(member), "\n");
    }
  }
}

// A restart is a new process (another pid) registering under the name an
// earlier one of the same role and host held: what a supervisor such as
// `splitspec serve` does after a worker dies. The membership table keeps dead
// members, so the count survives their deaths.
void RenderRestarts(const proto::StatusReply& status, std::string* out) {
  struct Name {
    proto::Role role;
    std::string host;
    std::string worker_name;
    auto operator<=>(const Name&) const = default;
  };
  std::map<Name, std::set<uint32_t>> pids;
  for (const proto::MemberStatus& m : status.members()) {
    std::set<uint32_t>& seen = pids[{m.role(), m.host(), m.worker_name()}];
    if (m.pid() != 0) seen.insert(m.pid());
  }
  Header("splitspec_worker_restarts_total", "counter",
         "Processes that registered under a worker's name after its first one (restarts)", out);
  for (const auto& [name, seen] : pids) {
    absl::StrAppend(out, "splitspec_worker_restarts_total{worker_name=\"",
                    PrometheusLabelValue(name.worker_name), "\",role=\"", RoleName(name.role),
                    "\"} ", seen.empty() ? 0 : seen.size() - 1, "\n");
  }
}

}  // namespace

std::string PrometheusNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[32];  // the shortest round-trip form of a double takes at most 24
  const std::to_chars_result end = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, end.ptr);
}

std::string PrometheusLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& help, std::string* out) const {
  Header(name, "histogram", help, out);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppend(out, name, "_bucket{le=\"", PrometheusNumber(bounds_[i]), "\"} ", cumulative,
                    "\n");
  }
  absl::StrAppend(out, name, "_bucket{le=\"+Inf\"} ", count_, "\n");
  SampleReal(name + "_sum", sum_, out);
  absl::StrAppend(out, name, "_count ", count_, "\n");
}

FrontDoorMetrics::FrontDoorMetrics()
    : ttft_(LatencyBounds()), inter_token_(LatencyBounds()), e2e_(LatencyBounds()) {}

void FrontDoorMetrics::RecordOutcome(RequestOutcome outcome) {
  MutexLock lock(&mu_);
  ++outcomes_[outcome];
}

void FrontDoorMetrics::RecordHttpError(int status) {
  MutexLock lock(&mu_);
  ++http_errors_[status];
}

void FrontDoorMetrics::AddRunning(int delta) {
  MutexLock lock(&mu_);
  running_ += delta;
}

int64_t FrontDoorMetrics::running() const {
  MutexLock lock(&mu_);
  return running_;
}

void FrontDoorMetrics::AddPromptTokens(int tokens) {
  MutexLock lock(&mu_);
  prompt_tokens_ += static_cast<uint64_t>(tokens);
}

void FrontDoorMetrics::RecordGuided() {
  MutexLock lock(&mu_);
  ++guided_requests_;
}

void FrontDoorMetrics::ObserveTokens(int tokens, double gap_seconds, bool first) {
  MutexLock lock(&mu_);
  generation_tokens_ += static_cast<uint64_t>(tokens);
  if (first) {
    ttft_.Observe(gap_seconds);
  } else {
    inter_token_.Observe(gap_seconds);
  }
  for (int i = 1; i < tokens; ++i) inter_token_.Observe(0.0);
}

void FrontDoorMetrics::ObserveFinished(double e2e_seconds, const proto::SpecStats& stats) {
  MutexLock lock(&mu_);
  e2e_.Observe(e2e_seconds);
  spec_.set_drafted(spec_.drafted() + stats.drafted());
  spec_.set_verified(spec_.verified() + stats.verified());
  spec_.set_accepted(spec_.accepted() + stats.accepted());
  spec_.set_steps(spec_.steps() + stats.steps());
  guidance_forward_tokens_ += stats.companion_forward_tokens();
  AddPerPosition(stats.verified_at(), spec_.mutable_verified_at());
  AddPerPosition(stats.accepted_at(), spec_.mutable_accepted_at());
}

std::string FrontDoorMetrics::Render(const proto::StatusReply* status) const {
  MutexLock lock(&mu_);
  std::string out;
  Header("splitspec_requests_total", "counter", "Generation requests by outcome", &out);
  for (RequestOutcome outcome :
       {RequestOutcome::kStop, RequestOutcome::kLength, RequestOutcome::kCancelled,
        RequestOutcome::kRejected, RequestOutcome::kFailed}) {
    auto it = outcomes_.find(outcome);
    absl::StrAppend(&out, "splitspec_requests_total{outcome=\"", OutcomeName(outcome), "\"} ",
                    it == outcomes_.end() ? 0 : it->second, "\n");
  }
  Header("splitspec_http_errors_total", "counter", "Error responses by HTTP status", &out);
  for (const auto& [code, count] : http_errors_) {
    absl::StrAppend(&out, "splitspec_http_errors_total{code=\"", code, "\"} ", count, "\n");
  }
  Header("splitspec_num_requests_running", "gauge",
         "Generation requests in flight at this front door", &out);
  Sample("splitspec_num_requests_running", running_, &out);
  Header("splitspec_prompt_tokens_total", "counter", "Prompt tokens submitted", &out);
  Sample("splitspec_prompt_tokens_total", prompt_tokens_, &out);
  Header("splitspec_generation_tokens_total", "counter", "Generated tokens received", &out);
  Sample("splitspec_generation_tokens_total", generation_tokens_, &out);
  Header("splitspec_guided_requests_total", "counter",
         "Requests submitted with classifier-free guidance", &out);
  Sample("splitspec_guided_requests_total", guided_requests_, &out);
  Header("splitspec_guidance_forward_tokens_total", "counter",
         "Extra tokens the targets fed for guidance (unconditional sequences)", &out);
  Sample("splitspec_guidance_forward_tokens_total", guidance_forward_tokens_, &out);
  ttft_.Render("splitspec_time_to_first_token_seconds", "Time from request to first token", &out);
  inter_token_.Render("splitspec_inter_token_latency_seconds",
                      "Gap between consecutive tokens of a request", &out);
  e2e_.Render("splitspec_e2e_request_latency_seconds", "Time from request to its end", &out);
  const std::pair<const char*, uint64_t> spec[] = {
      {"splitspec_spec_decode_num_draft_tokens_total", spec_.drafted()},
      {"splitspec_spec_decode_num_verified_tokens_total", spec_.verified()},
      {"splitspec_spec_decode_num_accepted_tokens_total", spec_.accepted()},
      {"splitspec_spec_decode_num_steps_total", spec_.steps()}};
  for (const auto& [name, value] : spec) {
    Header(name, "counter", "Speculative decoding totals of finished requests (SpecStats)", &out);
    Sample(name, value, &out);
  }
  Header("splitspec_spec_decode_acceptance_rate", "gauge", "Accepted / verified draft tokens",
         &out);
  SampleReal("splitspec_spec_decode_acceptance_rate",
             spec_.verified() == 0
                 ? 0.0
                 : static_cast<double>(spec_.accepted()) / static_cast<double>(spec_.verified()),
             &out);
  RenderPerPosition("splitspec_spec_decode_num_verified_tokens_per_pos",
                    "Verified draft tokens by position in their block (finished requests)",
                    spec_.verified_at(), &out);
  RenderPerPosition("splitspec_spec_decode_num_accepted_tokens_per_pos",
                    "Accepted draft tokens by position in their block (finished requests)",
                    spec_.accepted_at(), &out);
  Header("splitspec_coordinator_up", "gauge", "1 if the coordinator answered the status query",
         &out);
  Sample("splitspec_coordinator_up", status != nullptr ? 1 : 0, &out);
  if (status != nullptr) {
    Header("splitspec_num_requests_waiting", "gauge",
           "Requests the coordinator admitted that wait for a target group", &out);
    Sample("splitspec_num_requests_waiting", status->queued_requests(), &out);
    Header("splitspec_coordinator_requests_running", "gauge",
           "Requests placed on target groups (all front doors)", &out);
    Sample("splitspec_coordinator_requests_running", status->running_requests(), &out);
    Header("splitspec_refused_peers_total", "counter",
           "Peers the coordinator refused: CURVE keys not authorized, and messages their "
           "sender's key or identity may not send",
           &out);
    Sample("splitspec_refused_peers_total", status->refused_peers(), &out);
    RenderWorkers(*status, &out);
    RenderRestarts(*status, &out);
  }
  return out;
}

}  // namespace splitspec::coordinator::http
