#include "runtime/net/mem_channel.h"

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/mutex.h"

namespace splitspec::net {
namespace {

// A queue of frames with a blocking pop. Shared by the channel that reads it
// and every channel that writes to it.
class Inbox {
 public:
  void Push(RawFrame frame) {
    MutexLock lock(&mu_);
    frames_.push_back(std::move(frame));
    cv_.NotifyOne();
  }

  absl::StatusOr<RawFrame> Pop(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (frames_.empty()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(
            absl::StrCat("no message within ", absl::FormatDuration(timeout)));
      }
      cv_.WaitWithTimeout(&mu_, left);
    }
    RawFrame frame = std::move(frames_.front());
    frames_.pop_front();
    return frame;
  }

  bool NonEmpty() {
    MutexLock lock(&mu_);
    return !frames_.empty();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<RawFrame> frames_ ABSL_GUARDED_BY(mu_);
};

// Listener-side state: its inbox and its connected peers' inboxes.
struct Endpoint {
  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Inbox>> peers ABSL_GUARDED_BY(mu);
};

// Process-wide registry of bound mem:// names.
class Hub {
 public:
  static Hub& Get() {
    static Hub* hub = new Hub();
    return *hub;
  }
  absl::StatusOr<std::shared_ptr<Endpoint>> Bind(const std::string& name) {
    MutexLock lock(&mu_);
    if (endpoints_.contains(name))
      return absl::AlreadyExistsError(absl::StrCat("'", name, "' is already bound"));
    auto endpoint = std::make_shared<Endpoint>();
    endpoints_[name] = endpoint;
    return endpoint;
  }
  void Unbind(const std::string& name) {
    MutexLock lock(&mu_);
    endpoints_.erase(name);
  }
  std::shared_ptr<Endpoint> Find(const std::string& name) {
    MutexLock lock(&mu_);
    auto it = endpoints_.find(name);
    return it == endpoints_.end() ? nullptr : it->second.lock();
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
};

class MemListener final : public Channel {
 public:
  MemListener(std::string name, std::shared_ptr<Endpoint> endpoint)
      : name_(std::move(name)), endpoint_(std::move(endpoint)) {}
  ~MemListener() override { Hub::Get().Unbind(name_); }

  absl::Status SendBytes(absl::string_view peer, std::string bytes) override {
    std::shared_ptr<Inbox> inbox;
    {
      MutexLock lock(&endpoint_->mu);
      auto it = endpoint_->peers.find(peer);
      if (it == endpoint_->peers.end()) {
        return absl::NotFoundError(absl::StrCat("no peer '", peer, "' on ", name_));
      }
      inbox = it->second;
    }
    inbox->Push(RawFrame{"", std::move(bytes), false, "", ""});
    return absl::OkStatus();
  }
  absl::StatusOr<RawFrame> ReceiveBytes(absl::Duration timeout) override {
    return endpoint_->inbox->Pop(timeout);
  }
  std::string endpoint() const override { return name_; }
  bool Readable() override { return endpoint_->inbox->NonEmpty(); }

 private:
  const std::string name_;
  std::shared_ptr<Endpoint> endpoint_;
};

class MemConnector final : public Channel {
 public:
  MemConnector(std::string name, std::string identity, std::shared_ptr<Endpoint> endpoint,
               std::shared_ptr<Inbox> inbox)
      : name_(std::move(name)),
        identity_(std::move(identity)),
        endpoint_(std::move(endpoint)),
        inbox_(std::move(inbox)) {}
  ~MemConnector() override {
    MutexLock lock(&endpoint_->mu);
    endpoint_->peers.erase(identity_);
  }

  absl::Status SendBytes(absl::string_view /*peer*/, std::string bytes) override {
    if (Hub::Get().Find(name_) != endpoint_) {
      return absl::UnavailableError(absl::StrCat("listener ", name_, " is gone"));
    }
    endpoint_->inbox->Push(RawFrame{identity_, std::move(bytes), false, "", ""});
    return absl::OkStatus();
  }
  absl::StatusOr<RawFrame> ReceiveBytes(absl::Duration timeout) override {
    return inbox_->Pop(timeout);
  }
  std::string endpoint() const override { return name_; }
  bool Readable() override { return inbox_->NonEmpty(); }

 private:
  const std::string name_;
  const std::string identity_;
  std::shared_ptr<Endpoint> endpoint_;
  std::shared_ptr<Inbox> inbox_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Channel>> ListenMemChannel(const std::string& endpoint) {
  absl::StatusOr<std::shared_ptr<Endpoint>> bound = Hub::Get().Bind(endpoint);
  if (!bound.ok()) return bound.status();
  return std::unique_ptr<Channel>(new MemListener(endpoint, *std::move(bound)));
}

absl::StatusOr<std::unique_ptr<Channel>> ConnectMemChannel(const std::string& endpoint,
                                                           const std::string& identity) {
  std::shared_ptr<Endpoint> target = Hub::Get().Find(endpoint);
  if (target == nullptr)
    return absl::UnavailableError(absl::StrCat("nothing listens on ", endpoint));
  auto inbox = std::make_shared<Inbox>();
  {
    MutexLock lock(&target->mu);
    if (target->peers.contains(identity)) {
      return absl::AlreadyExistsError(
          absl::StrCat("peer '", identity, "' is already connected to ", endpoint));
    }
    target->peers[identity] = inbox;
  }
  return std::unique_ptr<Channel>(
      new MemConnector(endpoint, identity, std::move(target), std::move(inbox)));
}

}  // namespace splitspec::net
