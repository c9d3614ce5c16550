// HeartbeatSender: a thread that heartbeats one registered worker to the
// coordinator on its own connection, so that liveness does not depend on how
// long the worker's main loop spends in a forward pass (a long prefill must
// not get a healthy worker declared dead).
//
//   ASSIGN_OR_RETURN(auto sender, HeartbeatSender::Start(endpoint, worker_id, interval));
//   sender->set_load(load);                 // from the worker's loop
//   if (sender->forgotten()) { /* the coordinator lost us: register again */ }
//
// Thread model: the sender's thread owns its DEALER socket; set_load and the
// accessors are thread-safe. The destructor stops and joins the thread.
#ifndef SPLITSPEC_RUNTIME_NET_HEARTBEAT_SENDER_H_
#define SPLITSPEC_RUNTIME_NET_HEARTBEAT_SENDER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/base/mutex.h"
#include "runtime/net/channel.h"

namespace splitspec::net {

class HeartbeatSender {
 public:
  // Connects (its own identity) and starts the thread. Errors: ConnectChannel's.
  static absl::StatusOr<std::unique_ptr<HeartbeatSender>> Start(
      const std::string& coordinator_endpoint, uint64_t worker_id, absl::Duration interval);
  ~HeartbeatSender();

  void set_load(const proto::LoadReport& load);
  // True once the coordinator answered that it does not know this worker.
  bool forgotten() const { return forgotten_.load(std::memory_order_acquire); }
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }

 private:
  HeartbeatSender(std::unique_ptr<Channel> channel, uint64_t worker_id, absl::Duration interval)
      : channel_(std::move(channel)), worker_id_(worker_id), interval_(interval) {}
  void Loop();

  std::unique_ptr<Channel> channel_;  // used by the thread only
  const uint64_t worker_id_;
  const absl::Duration interval_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> forgotten_{false};
  std::atomic<uint64_t> sent_{0};
  Mutex mu_;
  proto::LoadReport load_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_HEARTBEAT_SENDER_H_
