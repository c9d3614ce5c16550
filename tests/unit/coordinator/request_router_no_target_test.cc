// RequestRouter with no target group to serve: a submission is refused at
// once (UNAVAILABLE), and a request left queued when its target died fails
// with a clear error after RouterOptions.queue_timeout (a fake clock drives
// Tick; nothing here sleeps).
#include "coordinator/request_router.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1000);
const std::string kClient = "client";

class RouterNoTargetTest : public ::testing::Test {
 protected:
  RouterNoTargetTest() : router_(Options()) {}

  static RouterOptions Options() {
    RouterOptions options;
    options.queue_timeout = absl::Seconds(30);
    return options;
  }

  void AddWorker(uint64_t id, proto::Role role) {
    proto::MemberStatus m;
    m.set_worker_id(id);
    m.set_role(role);
    m.set_data_endpoint("tcp://w" + std::to_string(id));
    router_.OnWorkerAlive(m, "peer-" + std::to_string(id), &out_);
  }

  void Submit(const std::string& id) {
    proto::SubmitRequest submit;
    submit.set_request_id(id);
    for (int32_t t : {5, 6, 7}) submit.add_prompt_tokens(t);
    submit.mutable_params()->set_max_tokens(8);
    router_.OnSubmit(kClient, submit, &out_);
  }

  // The Error sent to the client for `id` since the last call, or nullptr.
  const proto::Error* ClientError(const std::string& id) {
    for (const Outgoing& o : out_) {
      if (o.peer == kClient && o.envelope.has_error() && o.envelope.error().request_id() == id) {
        return &o.envelope.error();
      }
    }
    return nullptr;
  }

  bool ClientStreamFinished(const std::string& id, proto::FinishReason reason) {
    for (const Outgoing& o : out_) {
      if (o.peer == kClient && o.envelope.has_token_stream() &&
          o.envelope.token_stream().request_id() == id && o.envelope.token_stream().finished() &&
          o.envelope.token_stream().finish_reason() == reason) {
        return true;
      }
    }
    return false;
  }

  RequestRouter router_;
  std::vector<Outgoing> out_;
};

TEST_F(RouterNoTargetTest, SubmissionWithNoTargetGroupIsRefusedAtOnce) {
  AddWorker(7, proto::ROLE_DRAFT_WORKER);  // a draft worker alone cannot serve
  Submit("a");
  const proto::Error* error = ClientError("a");
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code(), proto::ERROR_CODE_UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(error->message(), "no target group is serving"))
      << error->message();
  EXPECT_TRUE(ClientStreamFinished("a", proto::FINISH_REASON_ERROR));
  EXPECT_EQ(router_.queued(), 0);
  EXPECT_EQ(router_.counters().refused, 1u);
}

TEST_F(RouterNoTargetTest, AQueuedRequestFailsAfterTheQueueTimeout) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("a");
  ASSERT_EQ(router_.running(), 1);
  router_.OnWorkerGone(1, &out_);  // no other target group: "a" waits queued
  ASSERT_EQ(router_.queued(), 1);
  out_.clear();
  router_.Tick(t0, &out_);
  router_.Tick(t0 + absl::Seconds(29), &out_);
  EXPECT_EQ(ClientError("a"), nullptr);
  EXPECT_EQ(router_.queued(), 1);
  router_.Tick(t0 + absl::Seconds(30), &out_);
  const proto::Error* error = ClientError("a");
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code(), proto::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(error->message(),
            "no target group became available within 30s (the request waited queued; retry later)");
  EXPECT_TRUE(ClientStreamFinished("a", proto::FINISH_REASON_ERROR));
  EXPECT_EQ(router_.queued(), 0);
  EXPECT_EQ(router_.counters().timed_out, 1u);
}

TEST_F(RouterNoTargetTest, AQueuedRequestPlacedInTimeDoesNotFail) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("a");
  router_.OnWorkerGone(1, &out_);
  router_.Tick(t0, &out_);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  EXPECT_EQ(router_.running(), 1);
  // Queued again later: its wait starts over.
  router_.OnWorkerGone(2, &out_);
  router_.Tick(t0 + absl::Seconds(40), &out_);
  router_.Tick(t0 + absl::Seconds(69), &out_);
  out_.clear();
  router_.Tick(t0 + absl::Seconds(69), &out_);
  EXPECT_EQ(ClientError("a"), nullptr);
  EXPECT_EQ(router_.queued(), 1);
  EXPECT_EQ(router_.counters().timed_out, 0u);
}

}  // namespace
}  // namespace splitspec::coordinator
