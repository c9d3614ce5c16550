// The front door's Prometheus text: counters, histograms, per-worker series.
#include "coordinator/http/front_door_metrics.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HistogramTest, RendersCumulativeBucketsSumAndCount) {
  Histogram h({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.1);
  h.Observe(0.5);
  h.Observe(3.0);
  std::string out;
  h.Render("x_seconds", "Some latency", &out);
  EXPECT_EQ(out,
            "# HELP x_seconds Some latency\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.1\"} 2\n"
            "x_seconds_bucket{le=\"1\"} 3\n"
            "x_seconds_bucket{le=\"+Inf\"} 4\n"
            "x_seconds_sum 3.65\n"
            "x_seconds_count 4\n");
}

TEST(FrontDoorMetricsTest, CountsOutcomesTokensAndSpeculation) {
  FrontDoorMetrics metrics;
  metrics.RecordOutcome(RequestOutcome::kStop);
  metrics.RecordOutcome(RequestOutcome::kStop);
  metrics.RecordOutcome(RequestOutcome::kCancelled);
  metrics.RecordHttpError(400);
  metrics.AddPromptTokens(7);
  metrics.ObserveTokens(3, 0.2, /*first=*/true);
  metrics.ObserveTokens(2, 0.01, /*first=*/false);
  proto::SpecStats stats;
  stats.set_drafted(10);
  stats.set_verified(8);
  stats.set_accepted(6);
  stats.set_steps(4);
  metrics.ObserveFinished(1.5, stats);
  const std::string text = metrics.Render(nullptr);
  EXPECT_THAT(text, HasSubstr("splitspec_requests_total{outcome=\"stop\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_requests_total{outcome=\"cancelled\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_requests_total{outcome=\"failed\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_http_errors_total{code=\"400\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_prompt_tokens_total 7\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_generation_tokens_total 5\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_time_to_first_token_seconds_count 1\n"));
  // Three tokens after the first one: 2 of the first burst (gap 0) and 2 more.
  EXPECT_THAT(text, HasSubstr("splitspec_inter_token_latency_seconds_count 4\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_inter_token_latency_seconds_bucket{le=\"0.001\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_num_draft_tokens_total 10\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_num_verified_tokens_total 8\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_num_accepted_tokens_total 6\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_num_steps_total 4\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_acceptance_rate 0.75\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE splitspec_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_coordinator_up 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("splitspec_worker_alive")));
}

TEST(FrontDoorMetricsTest, PerWorkerLivenessFromTheStatusTable) {
  proto::StatusReply status;
  proto::MemberStatus* target = status.add_members();
  target->set_worker_id(1);
  target->set_worker_name("target-\"0\"");
  target->set_role(proto::ROLE_TARGET_WORKER);
  target->set_state(proto::MEMBER_STATE_ALIVE);
  target->mutable_load()->set_active_requests(3);
  proto::MemberStatus* draft = status.add_members();
  draft->set_worker_id(2);
  draft->set_worker_name("draft-0");
  draft->set_role(proto::ROLE_DRAFT_WORKER);
  draft->set_state(proto::MEMBER_STATE_DEAD);
  const std::string text = FrontDoorMetrics().Render(&status);
  EXPECT_THAT(text, HasSubstr("splitspec_coordinator_up 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "splitspec_worker_alive{worker_id=\"1\",worker_name=\"target-\\\"0\\\"\",role=\"target\","
          "state=\"alive\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_worker_alive{worker_id=\"2\",worker_name=\"draft-0\",role="
                              "\"draft\",state=\"dead\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("splitspec_worker_active_requests{worker_id=\"1\",worker_name=\"target-\\\"0\\\"\","
                "role=\"target\",state=\"alive\"} 3\n"));
}

TEST(FrontDoorMetricsTest, RestartsAreNewProcessesUnderAWorkersName) {
  proto::StatusReply status;
  auto add = [&](uint64_t id, const std::string& name, proto::Role role, uint32_t pid,
                 proto::MemberState state) {
    proto::MemberStatus* m = status.add_members();
    m->set_worker_id(id);
    m->set_worker_name(name);
    m->set_role(role);
    m->set_host("h");
    m->set_pid(pid);
    m->set_state(state);
  };
  // draft-0 died twice and came back as new processes; target-0 re-registered
  // with its own pid (after a stall): that is no restart.
  add(1, "draft-0", proto::ROLE_DRAFT_WORKER, 100, proto::MEMBER_STATE_DEAD);
  add(2, "target-0", proto::ROLE_TARGET_WORKER, 200, proto::MEMBER_STATE_DEAD);
  add(3, "draft-0", proto::ROLE_DRAFT_WORKER, 101, proto::MEMBER_STATE_DEAD);
  add(4, "target-0", proto::ROLE_TARGET_WORKER, 200, proto::MEMBER_STATE_ALIVE);
  add(5, "draft-0", proto::ROLE_DRAFT_WORKER, 102, proto::MEMBER_STATE_ALIVE);
  const std::string text = FrontDoorMetrics().Render(&status);
  EXPECT_THAT(text, HasSubstr("# TYPE splitspec_worker_restarts_total counter\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_worker_restarts_total{worker_name=\"draft-0\",role="
                              "\"draft\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_worker_restarts_total{worker_name=\"target-0\",role="
                              "\"target\"} 0\n"));
}

TEST(FrontDoorMetricsTest, AcceptancePerDraftPositionAddsUpOverRequests) {
  FrontDoorMetrics metrics;
  proto::SpecStats first, second;
  for (uint64_t v : {5, 5, 4}) first.add_verified_at(v);
  for (uint64_t a : {4, 3, 1}) first.add_accepted_at(a);
  for (uint64_t v : {2, 2, 2, 2})
    second.add_verified_at(v);  // a longer block than the first request's
  for (uint64_t a : {2, 1, 0, 0}) second.add_accepted_at(a);
  metrics.ObserveFinished(1.0, first);
  metrics.ObserveFinished(1.0, second);
  const std::string text = metrics.Render(nullptr);
  EXPECT_THAT(text,
              HasSubstr("splitspec_spec_decode_num_verified_tokens_per_pos{position=\"0\"} 7\n"));
  EXPECT_THAT(text,
              HasSubstr("splitspec_spec_decode_num_verified_tokens_per_pos{position=\"3\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("splitspec_spec_decode_num_accepted_tokens_per_pos{position=\"0\"} 6\n"));
  EXPECT_THAT(text,
              HasSubstr("splitspec_spec_decode_num_accepted_tokens_per_pos{position=\"2\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("splitspec_spec_decode_num_accepted_tokens_per_pos{position=\"3\"} 0\n"));
}

TEST(FrontDoorMetricsTest, QueueDepthAndStepTimeFromTheCoordinatorStatus) {
  proto::StatusReply status;
  status.set_queued_requests(4);
  status.set_running_requests(9);
  status.set_refused_peers(3);
  proto::MemberStatus* target = status.add_members();
  target->set_worker_id(1);
  target->set_worker_name("t");
  target->set_role(proto::ROLE_TARGET_WORKER);
  target->set_state(proto::MEMBER_STATE_ALIVE);
  target->mutable_load()->set_mean_step_ms(12.5);
  target->mutable_load()->set_cuda_graph_capture_fallbacks(2);
  target->mutable_load()->set_kv_cache_bytes_per_position(12240);
  const std::string text = FrontDoorMetrics().Render(&status);
  EXPECT_THAT(text, HasSubstr("splitspec_num_requests_waiting 4\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_coordinator_requests_running 9\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_refused_peers_total 3\n"));
  EXPECT_THAT(
      text,
      HasSubstr("splitspec_worker_step_seconds{worker_id=\"1\",worker_name=\"t\",role=\"target\","
                "state=\"alive\"} 0.0125\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_worker_cuda_graph_capture_fallbacks{worker_id=\"1\","
                              "worker_name=\"t\",role=\"target\",state=\"alive\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_worker_kv_cache_bytes_per_position{worker_id=\"1\","
                              "worker_name=\"t\",role=\"target\",state=\"alive\"} 12240\n"));
}

// Before, every value went through absl::StrCat(double) (6 significant digits): 1234567
// read 1.23457e+06 and 16777217 (2^24 + 1) read 1.67772e+07.
TEST(FrontDoorMetricsTest, CountersAreExactIntegersAndOtherValuesRoundTrip) {
  FrontDoorMetrics metrics;
  metrics.AddPromptTokens(1234567);
  metrics.ObserveTokens(16777217, 0.1, /*first=*/true);
  proto::SpecStats stats;
  stats.set_drafted(9007199254740993ull);  // 2^53 + 1: not even a double holds it
  stats.set_verified(3);
  stats.set_accepted(1);
  stats.add_verified_at(16777217);
  metrics.ObserveFinished(0.1, stats);
  proto::StatusReply status;
  status.set_refused_peers(123456789012ull);
  proto::MemberStatus* draft = status.add_members();
  draft->set_worker_id(2);
  draft->set_worker_name("d");
  draft->set_role(proto::ROLE_DRAFT_WORKER);
  draft->set_state(proto::MEMBER_STATE_ALIVE);
  draft->mutable_load()->set_spec_cache_drafted_tokens(16777217);
  const std::string text = metrics.Render(&status);
  EXPECT_THAT(text, HasSubstr("splitspec_prompt_tokens_total 1234567\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_generation_tokens_total 16777217\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_num_draft_tokens_total 9007199254740993\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_num_verified_tokens_per_pos{position=\"0\"} "
                              "16777217\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_refused_peers_total 123456789012\n"));
  EXPECT_THAT(text, HasSubstr("splitspec_worker_spec_cache_drafted_tokens{worker_id=\"2\","
                              "worker_name=\"d\",role=\"draft\",state=\"alive\"} 16777217\n"));
  // Not integers: the shortest text that reads back as the same double.
  EXPECT_THAT(text, HasSubstr("splitspec_spec_decode_acceptance_rate 0.3333333333333333\n"));
  EXPECT_THAT(text, Not(HasSubstr("e+0")));
  EXPECT_EQ(PrometheusNumber(0.1), "0.1");
  EXPECT_EQ(PrometheusNumber(1234567.5), "1234567.5");
  EXPECT_EQ(PrometheusNumber(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(PrometheusNumber(1e300), "1e+300");
  EXPECT_EQ(PrometheusNumber(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(PrometheusNumber(std::numeric_limits<double>::quiet_NaN()), "NaN");
  for (double value : {0.1, 2.0 / 3.0, 1234567.891, 5e-324, 1.7976931348623157e308}) {
    double back = 0;
    ASSERT_TRUE(absl::SimpleAtod(PrometheusNumber(value), &back)) << value;
    EXPECT_EQ(back, value);
  }
}

TEST(FrontDoorMetricsTest, EveryLineIsACommentOrANameValuePair) {
  FrontDoorMetrics metrics;
  metrics.ObserveTokens(1, 0.3, true);
  const std::string text = metrics.Render(nullptr);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    const size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_EQ(line.rfind("splitspec_", 0), 0u) << line;
    double value;
    EXPECT_TRUE(absl::SimpleAtod(line.substr(space + 1), &value)) << line;
  }
}

}  // namespace
}  // namespace splitspec::coordinator::http
