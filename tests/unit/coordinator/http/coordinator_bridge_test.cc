// CoordinatorBridge's specification at its interface: the test plays the
// coordinator on an in-memory channel (mem://) and checks what the bridge
// sends it and what each GenerationSink / callback is told — submissions,
// streamed tokens, errors with their codes, cancellation from either side,
// status and drain queries (answered, refused, unanswered), and shutdown.
#include "coordinator/http/coordinator_bridge.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/net/channel.h"
#include "runtime/net/wire_format.h"

namespace splitspec::coordinator::http {
namespace {

// Guards against a hang only; no assertion depends on how long anything takes.
constexpr absl::Duration kPatience = absl::Seconds(20);

// What one sink was told, readable from the test thread.
struct SinkLog {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<int32_t> tokens;
  int token_calls = 0;
  std::optional<GenerationOutcome> outcome;
  int finish_calls = 0;

  // Waits until `done` holds (under mu); false if it never did.
  template <typename Done>
  bool WaitFor(Done done) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, absl::ToChronoSeconds(kPatience), [&] { return done(*this); });
  }
};

class RecordingSink : public GenerationSink {
 public:
  // `accept_tokens` false: the sink ends the response itself at its first tokens.
  RecordingSink(std::shared_ptr<SinkLog> log, bool accept_tokens = true)
      : log_(std::move(log)), accept_tokens_(accept_tokens) {}

  bool OnTokens(const proto::TokenStream& stream) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->tokens.insert(log_->tokens.end(), stream.tokens().begin(), stream.tokens().end());
    ++log_->token_calls;
    log_->changed.notify_all();
    return accept_tokens_;
  }
  void OnFinished(const GenerationOutcome& outcome) override {
    std::lock_guard<std::mutex> lock(log_->mu);
    log_->outcome = outcome;
    ++log_->finish_calls;
    log_->changed.notify_all();
  }

 private:
  std::shared_ptr<SinkLog> log_;
  bool accept_tokens_;
};

// A callback's answer, readable from the test thread.
template <typename T>
struct Answer {
  std::mutex mu;
  std::condition_variable changed;
  std::optional<absl::StatusOr<T>> value;

  std::function<void(absl::StatusOr<T>)> Callback() {
    return [this](absl::StatusOr<T> v) {
      std::lock_guard<std::mutex> lock(mu);
      value = std::move(v);
      changed.notify_all();
    };
  }
  absl::StatusOr<T> Wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (!changed.wait_for(lock, absl::ToChronoSeconds(kPatience),
                          [&] { return value.has_value(); })) {
      return absl::InternalError("the callback never ran");
    }
    return *value;
  }
};

class CoordinatorBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(BridgeOptions options) {
    static int counter = 0;
    auto listener =
        net::ListenChannel("mem://coordinator-bridge-test-" + std::to_string(counter++));
    ASSERT_TRUE(listener.ok()) << listener.status();
    coordinator_ = *std::move(listener);
    auto bridge = CoordinatorBridge::Start(coordinator_->endpoint(), options);
    ASSERT_TRUE(bridge.ok()) << bridge.status();
    bridge_ = *std::move(bridge);
  }

  // The next message the bridge sent the coordinator.
  proto::Envelope FromBridge() {
    absl::StatusOr<net::Frame> frame = coordinator_->Receive(kPatience);
    EXPECT_TRUE(frame.ok()) << frame.status();
    if (!frame.ok()) return {};
    bridge_peer_ = frame->peer;
    return frame->envelope;
  }

  void ToBridge(proto::Envelope envelope) {
    ASSERT_TRUE(coordinator_->Send(bridge_peer_, envelope).ok());
  }

  void Stream(const std::string& id, std::vector<int32_t> tokens, bool finished = false,
              proto::FinishReason reason = proto::FINISH_REASON_UNSPECIFIED) {
    proto::Envelope e = net::NewEnvelope();
    proto::TokenStream* s = e.mutable_token_stream();
    s->set_request_id(id);
    s->mutable_tokens()->Assign(tokens.begin(), tokens.end());
    s->set_finished(finished);
    s->set_finish_reason(reason);
    s->mutable_stats()->set_accepted(static_cast<uint64_t>(tokens.size()));
    ToBridge(std::move(e));
  }

  void SendError(const std::string& id, proto::ErrorCode code, const std::string& message) {
    proto::Envelope e = net::NewEnvelope();
    e.mutable_error()->set_request_id(id);
    e.mutable_error()->set_code(code);
    e.mutable_error()->set_message(message);
    ToBridge(std::move(e));
  }

  // Submits `id` and returns its log once the coordinator has the submission.
  std::shared_ptr<SinkLog> Submit(const std::string& id, bool accept_tokens = true) {
    auto log = std::make_shared<SinkLog>();
    proto::SubmitRequest submit;
    submit.set_request_id(id);
    for (int32_t t : {1, 2, 3}) submit.add_prompt_tokens(t);
    bridge_->Submit(submit, std::make_unique<RecordingSink>(log, accept_tokens));
    const proto::Envelope got = FromBridge();
    EXPECT_TRUE(got.has_submit());
    EXPECT_EQ(got.submit().request_id(), id);
    EXPECT_EQ(got.submit().prompt_tokens_size(), 3);
    return log;
  }

  static bool Finished(const SinkLog& log) { return log.finish_calls > 0; }

  // True once in_flight() is `n` (the count drops just after a sink's OnFinished).
  bool InFlightBecomes(int n) {
    const absl::Time give_up = absl::Now() + kPatience;
    while (bridge_->in_flight() != n && absl::Now() < give_up)
      absl::SleepFor(absl::Milliseconds(1));
    return bridge_->in_flight() == n;
  }

  std::unique_ptr<net::Channel> coordinator_;
  std::unique_ptr<CoordinatorBridge> bridge_;
  std::string bridge_peer_;
};

TEST_F(CoordinatorBridgeTest, StreamsTokensInOrderThenTheFinishReason) {
  auto log = Submit("r");
  EXPECT_TRUE(InFlightBecomes(1));
  Stream("r", {10, 11});
  Stream("r", {12}, /*finished=*/true, proto::FINISH_REASON_STOP);
  ASSERT_TRUE(log->WaitFor(Finished));
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_EQ(log->tokens, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(log->finish_calls, 1);
  EXPECT_EQ(log->outcome->finish_reason, proto::FINISH_REASON_STOP);
  EXPECT_EQ(log->outcome->error_code, proto::ERROR_CODE_UNSPECIFIED);
  EXPECT_EQ(log->outcome->stats.accepted(), 1u);
  EXPECT_TRUE(InFlightBecomes(0));
}

TEST_F(CoordinatorBridgeTest, CoordinatorErrorKeepsItsCodeAndMessage) {
  auto log = Submit("r");
  SendError("r", proto::ERROR_CODE_RESOURCE_EXHAUSTED, "queue is full (256 requests waiting)");
  Stream("r", {}, /*finished=*/true, proto::FINISH_REASON_ERROR);
  ASSERT_TRUE(log->WaitFor(Finished));
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_EQ(log->outcome->finish_reason, proto::FINISH_REASON_ERROR);
  EXPECT_EQ(log->outcome->error_code, proto::ERROR_CODE_RESOURCE_EXHAUSTED);
  EXPECT_EQ(log->outcome->error_message, "queue is full (256 requests waiting)");
}

TEST_F(CoordinatorBridgeTest, FailureWithoutAReasonIsReportedAsInternal) {
  auto log = Submit("r");
  Stream("r", {}, /*finished=*/true, proto::FINISH_REASON_ERROR);
  ASSERT_TRUE(log->WaitFor(Finished));
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_EQ(log->outcome->error_code, proto::ERROR_CODE_INTERNAL);
  EXPECT_EQ(log->outcome->error_message,
            "the request failed without a reason from the coordinator");
}

TEST_F(CoordinatorBridgeTest, CancelTellsTheCoordinatorAndFinishesTheSinkOnce) {
  auto log = Submit("r");
  bridge_->Cancel("r");
  const proto::Envelope cancel = FromBridge();
  ASSERT_TRUE(cancel.has_cancel());
  EXPECT_EQ(cancel.cancel().request_id(), "r");
  ASSERT_TRUE(log->WaitFor(Finished));
  // Late tokens for the cancelled request go nowhere. A second request's
  // tokens, sent after them, show the bridge has read past them.
  Stream("r", {10}, /*finished=*/true, proto::FINISH_REASON_LENGTH);
  auto other = Submit("s");
  Stream("s", {20}, /*finished=*/true, proto::FINISH_REASON_LENGTH);
  ASSERT_TRUE(other->WaitFor(Finished));
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_EQ(log->outcome->finish_reason, proto::FINISH_REASON_CANCELLED);
  EXPECT_EQ(log->finish_calls, 1);
  EXPECT_TRUE(log->tokens.empty());
  EXPECT_TRUE(InFlightBecomes(0));
}

TEST_F(CoordinatorBridgeTest, SinkThatEndsItsResponseCancelsAtTheCoordinator) {
  auto log = Submit("r", /*accept_tokens=*/false);
  Stream("r", {10, 11});
  const proto::Envelope cancel = FromBridge();
  ASSERT_TRUE(cancel.has_cancel());
  EXPECT_EQ(cancel.cancel().request_id(), "r");
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_EQ(log->tokens, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(log->finish_calls, 0) << "the sink finished its response itself";
}

TEST_F(CoordinatorBridgeTest, StatusQueryGetsTheCoordinatorsReply) {
  Answer<proto::StatusReply> answer;
  bridge_->QueryStatus(answer.Callback());
  ASSERT_TRUE(FromBridge().has_status_request());
  proto::Envelope reply = net::NewEnvelope();
  reply.mutable_status_reply()->set_running_requests(3);
  reply.mutable_status_reply()->add_members()->set_worker_id(9);
  ToBridge(reply);
  absl::StatusOr<proto::StatusReply> got = answer.Wait();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->running_requests(), 3u);
  ASSERT_EQ(got->members_size(), 1);
  EXPECT_EQ(got->members(0).worker_id(), 9u);
}

TEST_F(CoordinatorBridgeTest, UnansweredQueriesFailWithDeadlineExceeded) {
  bridge_.reset();
  BridgeOptions options;
  options.status_timeout = absl::Milliseconds(20);
  Start(options);
  Answer<proto::StatusReply> status;
  Answer<proto::DrainReply> drain;
  bridge_->QueryStatus(status.Callback());
  bridge_->Drain(proto::DrainRequest(), drain.Callback());
  absl::StatusOr<proto::StatusReply> s = status.Wait();
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.status().message(), "the coordinator did not answer a status query within 20ms");
  absl::StatusOr<proto::DrainReply> d = drain.Wait();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(d.status().message(), "the coordinator did not answer a drain request within 20ms");
}

TEST_F(CoordinatorBridgeTest, DrainGetsTheReplyOrTheRefusalWithItsCode) {
  Answer<proto::DrainReply> accepted;
  proto::DrainRequest request;
  request.add_worker_ids(4);
  bridge_->Drain(request, accepted.Callback());
  const proto::Envelope sent = FromBridge();
  ASSERT_TRUE(sent.has_drain_request());
  EXPECT_EQ(sent.drain_request().worker_ids(0), 4u);
  proto::Envelope reply = net::NewEnvelope();
  reply.mutable_drain_reply()->add_worker_ids(4);
  ToBridge(reply);
  absl::StatusOr<proto::DrainReply> got = accepted.Wait();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->worker_ids(0), 4u);

  Answer<proto::DrainReply> refused;
  bridge_->Drain(request, refused.Callback());
  ASSERT_TRUE(FromBridge().has_drain_request());
  SendError("", proto::ERROR_CODE_NOT_FOUND, "DrainRequest.worker_ids: no live worker has id 4");
  absl::StatusOr<proto::DrainReply> refusal = refused.Wait();
  EXPECT_EQ(refusal.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(refusal.status().message(), "DrainRequest.worker_ids: no live worker has id 4");
}

TEST_F(CoordinatorBridgeTest, StopCancelsWhatIsInFlightAndRefusesLaterWork) {
  auto log = Submit("r");
  bridge_->Stop();
  const proto::Envelope cancel = FromBridge();
  ASSERT_TRUE(cancel.has_cancel());
  EXPECT_EQ(cancel.cancel().request_id(), "r");
  {
    std::lock_guard<std::mutex> lock(log->mu);
    ASSERT_EQ(log->finish_calls, 1) << "Stop joins the bridge thread after finishing every sink";
    EXPECT_EQ(log->outcome->finish_reason, proto::FINISH_REASON_ERROR);
    EXPECT_EQ(log->outcome->error_code, proto::ERROR_CODE_UNAVAILABLE);
    EXPECT_EQ(log->outcome->error_message, "the HTTP front door is shutting down");
  }
  EXPECT_EQ(bridge_->in_flight(), 0);
  auto late = std::make_shared<SinkLog>();
  bridge_->Submit(proto::SubmitRequest(), std::make_unique<RecordingSink>(late));
  EXPECT_EQ(late->finish_calls, 0) << "dropped: no thread is left to call it";
  EXPECT_FALSE(coordinator_->Receive(absl::ZeroDuration()).ok()) << "nothing sent after Stop";
}

}  // namespace
}  // namespace splitspec::coordinator::http
