#include "runtime/net/rendezvous_server.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/rendezvous_wire.h"

namespace splitspec::net {
namespace {

using internal::RendezvousMessage;
using internal::RendezvousOp;

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

// A Get waiting for its key.
struct Waiter {
  std::string peer;
  uint64_t request_id;
  std::string key;
  absl::Time deadline;
};

// The store and its waiters; lives on the serving thread only.
class StoreState {
 public:
  explicit StoreState(Channel* channel) : channel_(channel) {}

  void Handle(const std::string& peer, RendezvousMessage request) {
    if (request.op == RendezvousOp::kSet) {
      if (values_.contains(request.key)) {
        Reply(peer, request.request_id, RendezvousOp::kRefused, "");
        return;
      }
      Reply(peer, request.request_id, RendezvousOp::kSetDone, "");
      values_[request.key] = std::move(request.value);
      AnswerWaitersOf(request.key);
    } else if (request.op == RendezvousOp::kGet) {
      auto it = values_.find(request.key);
      if (it != values_.end()) {
        Reply(peer, request.request_id, RendezvousOp::kValue, it->second);
      } else {
        waiters_.push_back({peer, request.request_id, std::move(request.key),
                            absl::Now() + absl::Milliseconds(request.wait_ms)});
      }
    }
  }

  // Answers kMissing to every waiter whose deadline has passed.
  void ExpireWaiters() {
    const absl::Time now = absl::Now();
    std::vector<Waiter> kept;
    for (Waiter& w : waiters_) {
      if (w.deadline <= now) {
        Reply(w.peer, w.request_id, RendezvousOp::kMissing, "");
      } else {
        kept.push_back(std::move(w));
      }
    }
    waiters_ = std::move(kept);
  }

 private:
  void AnswerWaitersOf(const std::string& key) {
    std::vector<Waiter> kept;
    for (Waiter& w : waiters_) {
      if (w.key == key) {
        Reply(w.peer, w.request_id, RendezvousOp::kValue, values_[key]);
      } else {
        kept.push_back(std::move(w));
      }
    }
    waiters_ = std::move(kept);
  }

  void Reply(const std::string& peer, uint64_t request_id, RendezvousOp op,
             const std::string& value) {
    RendezvousMessage reply;
    reply.op = op;
    reply.request_id = request_id;
    reply.value = value;
    absl::Status s = channel_->SendBytes(peer, internal::EncodeRendezvousMessage(reply));
    if (!s.ok()) SPLITSPEC_LOG(WARNING) << "rendezvous reply to '" << peer << "': " << s;
  }

  Channel* channel_;
  absl::flat_hash_map<std::string, std::string> values_;
  std::vector<Waiter> waiters_;
};

}  // namespace

RendezvousServer::RendezvousServer(std::unique_ptr<Channel> channel)
    : channel_(std::move(channel)), endpoint_(channel_->endpoint()) {}

absl::StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const std::string& endpoint) {
  ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel, ListenChannel(endpoint));
  std::unique_ptr<RendezvousServer> server(new RendezvousServer(std::move(channel)));
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

RendezvousServer::~RendezvousServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void RendezvousServer::Serve() {
  StoreState state(channel_.get());
  while (!stop_.load()) {
    absl::StatusOr<RawFrame> frame = channel_->ReceiveBytes(kPollInterval);
    if (frame.ok()) {
      absl::StatusOr<RendezvousMessage> request = internal::DecodeRendezvousMessage(frame->bytes);
      const bool is_request =
          request.ok() && !frame->multipart &&
          (request->op == RendezvousOp::kSet || request->op == RendezvousOp::kGet);
      if (!is_request) {
        malformed_frames_.fetch_add(1);
        continue;
      }
      if (request->op == RendezvousOp::kSet) keys_set_.fetch_add(1);
      state.Handle(frame->peer, *std::move(request));
    }
    state.ExpireWaiters();
  }
}

}  // namespace splitspec::net
