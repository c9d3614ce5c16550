#include "runtime/net/heartbeat_sender.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {

absl::StatusOr<std::unique_ptr<HeartbeatSender>> HeartbeatSender::Start(
    const std::string& coordinator_endpoint, uint64_t worker_id, absl::Duration interval) {
  static std::atomic<int> counter{0};
  ASSIGN_OR_RETURN(
      std::unique_ptr<Channel> channel,
      ConnectChannel(coordinator_endpoint, absl::StrCat("heartbeat-", worker_id, "-", getpid(), "-",
                                                        counter.fetch_add(1))));
  std::unique_ptr<HeartbeatSender> sender(
      new HeartbeatSender(std::move(channel), worker_id, interval));
  HeartbeatSender* raw = sender.get();
  sender->thread_ = std::thread([raw] { raw->Loop(); });
  return sender;
}

HeartbeatSender::~HeartbeatSender() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void HeartbeatSender::set_load(const proto::LoadReport& load) {
  MutexLock lock(&mu_);
  load_ = load;
}

void HeartbeatSender::Loop() {
  uint64_t sequence = 0;
  absl::Time next = absl::Now();
  while (!stop_.load()) {
    if (absl::Now() >= next) {
      proto::Envelope envelope = NewEnvelope();
      proto::Heartbeat* heartbeat = envelope.mutable_heartbeat();
      heartbeat->set_worker_id(worker_id_);
      heartbeat->set_sequence(++sequence);
      {
        MutexLock lock(&mu_);
        *heartbeat->mutable_load() = load_;
      }
      if (channel_->Send("", envelope).ok()) sent_.fetch_add(1, std::memory_order_relaxed);
      next = absl::Now() + interval_;
    }
    // Short waits keep shutdown prompt.
    absl::StatusOr<Frame> frame =
        channel_->Receive(std::min(next - absl::Now(), absl::Milliseconds(20)));
    if (frame.ok() && frame->envelope.has_heartbeat_ack() &&
        !frame->envelope.heartbeat_ack().known()) {
      forgotten_.store(true, std::memory_order_release);
    }
  }
}

}  // namespace splitspec::net
