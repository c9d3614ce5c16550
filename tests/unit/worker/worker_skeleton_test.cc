// WorkerSkeleton (runtime/worker/worker_skeleton.h) against a scripted coordinator:
// registration, control dispatch to the handler, errors back with their codes,
// and a drain that ends in a Deregister "drained".
#include "runtime/worker/worker_skeleton.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/net/wire_format.h"

namespace splitspec::worker {

using net::BodyName;
using net::Channel;
using net::Frame;
using net::ListenChannel;
using net::NewEnvelope;
using net::WaitAnyReadable;
namespace {

using ::testing::ElementsAre;

// Refuses "bad-*" as invalid and "full-*" as resource exhausted.
class RecordingHandler : public ControlHandler {
 public:
  absl::Status Assign(const proto::Assignment& assignment) override {
    std::lock_guard<std::mutex> lock(mu_);
    assigned_.push_back(assignment.request_id());
    if (assignment.request_id().rfind("bad-", 0) == 0)
      return absl::InvalidArgumentError("bad request");
    if (assignment.request_id().rfind("full-", 0) == 0) return absl::ResourceExhaustedError("full");
    return absl::OkStatus();
  }
  void Release(const std::string& request_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    released_.push_back(request_id);
  }
  std::vector<std::string> assigned() {
    std::lock_guard<std::mutex> lock(mu_);
    return assigned_;
  }
  std::vector<std::string> released() {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> assigned_;
  std::vector<std::string> released_;
};

// The next frame on `coordinator` that is not a heartbeat (10 s bound).
absl::StatusOr<Frame> NextControlFrame(Channel& coordinator) {
  for (;;) {
    absl::StatusOr<Frame> frame = coordinator.Receive(absl::Seconds(10));
    if (!frame.ok() || !frame->envelope.has_heartbeat()) return frame;
  }
}

TEST(WorkerSkeletonTest, DispatchesControlRefusesWithCodesAndLeavesDrained) {
  auto coordinator = ListenChannel("mem://worker-skeleton-test");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  proto::Register registration;
  registration.set_role(proto::ROLE_DRAFT_WORKER);
  registration.set_worker_name("draft-test");
  auto skeleton = WorkerSkeleton::Connect((*coordinator)->endpoint(), registration);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();

  RecordingHandler handler;
  std::atomic<bool> give_up{false};
  absl::Status left = absl::UnknownError("worker loop did not run");
  std::thread worker([&] {
    while (!(*skeleton)->drain_requested() && !give_up) {
      if (absl::Status ticked = (*skeleton)->Tick(absl::Now()); !ticked.ok()) {
        left = ticked;
        return;
      }
      (*skeleton)->DispatchControl(handler);
      WaitAnyReadable({&(*skeleton)->control_channel()}, absl::Milliseconds(5));
    }
    left = (*skeleton)->Leave("draft worker 'draft-test'");
  });

  absl::StatusOr<Frame> frame = NextControlFrame(**coordinator);
  ASSERT_TRUE(frame.ok()) << frame.status();
  ASSERT_TRUE(frame->envelope.has_register_worker()) << BodyName(frame->envelope);
  const std::string peer = frame->peer;
  proto::Envelope ack = NewEnvelope();
  ack.mutable_register_ack()->set_worker_id(7);
  ack.mutable_register_ack()->set_heartbeat_interval_ms(1000);
  ASSERT_TRUE((*coordinator)->Send(peer, ack).ok());
  for (const char* id : {"ok-1", "bad-1", "full-1"}) {
    proto::Envelope assignment = NewEnvelope();
    assignment.mutable_assignment()->set_request_id(id);
    ASSERT_TRUE((*coordinator)->Send(peer, assignment).ok());
  }
  proto::Envelope release = NewEnvelope();
  release.mutable_release()->set_request_id("ok-1");
  proto::Envelope cancel = NewEnvelope();
  cancel.mutable_cancel()->set_request_id("c-1");
  proto::Envelope drain = NewEnvelope();
  drain.mutable_drain()->set_reason("test");
  for (const proto::Envelope* e : {&release, &cancel, &drain}) {
    ASSERT_TRUE((*coordinator)->Send(peer, *e).ok());
  }

  std::vector<std::pair<std::string, proto::ErrorCode>> errors;
  std::string deregister_reason;
  while (deregister_reason.empty()) {
    frame = NextControlFrame(**coordinator);
    if (!frame.ok()) break;
    if (frame->envelope.has_error()) {
      errors.emplace_back(frame->envelope.error().request_id(), frame->envelope.error().code());
    } else if (frame->envelope.has_deregister()) {
      EXPECT_EQ(frame->envelope.deregister().worker_id(), 7u);
      deregister_reason = frame->envelope.deregister().reason();
      proto::Envelope bye = NewEnvelope();
      bye.mutable_heartbeat_ack()->set_worker_id(7);
      bye.mutable_heartbeat_ack()->set_known(false);
      EXPECT_TRUE((*coordinator)->Send(frame->peer, bye).ok());
    }
  }
  give_up = true;
  worker.join();

  EXPECT_TRUE(left.ok()) << left;
  EXPECT_EQ(deregister_reason, "drained");
  EXPECT_THAT(handler.assigned(), ElementsAre("ok-1", "bad-1", "full-1"));
  EXPECT_THAT(handler.released(), ElementsAre("ok-1", "c-1"));
  EXPECT_THAT(
      errors,
      ElementsAre(std::make_pair(std::string("bad-1"), proto::ERROR_CODE_INVALID_ARGUMENT),
                  std::make_pair(std::string("full-1"), proto::ERROR_CODE_RESOURCE_EXHAUSTED)));
}

}  // namespace
}  // namespace splitspec::worker
