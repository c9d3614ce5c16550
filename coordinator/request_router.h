// RequestRouter: the coordinator's request lifecycle and placement policy.
//
// Lifecycle (DESIGN.md §2): queued -> running -> finished, exactly once (stop,
// length, cancellation or error). The router keeps every request's committed
// tokens, so a request whose target dies is re-placed and re-prefilled from
// them, and a request whose draft worker dies gets another one (or none: the
// target then decodes alone). Placement is least-loaded by the router's own
// count of running requests per worker.
//
// Pure policy: no sockets. Every decision is returned as Outgoing messages
// (addressed by ZeroMQ peer identity) for the service to send.
//
// Thread safety: thread-compatible (the coordinator's control thread owns it).
#ifndef SPLITSPEC_COORDINATOR_REQUEST_ROUTER_H_
#define SPLITSPEC_COORDINATOR_REQUEST_ROUTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/splitspec.pb.h"

namespace splitspec::coordinator {

struct Outgoing {
  std::string peer;  // control-channel identity of a worker or client
  proto::Envelope envelope;
};

struct RouterOptions {
  int max_queued = 256;          // waiting requests before submissions are refused
  int max_new_tokens = 4096;     // upper bound on SamplingParams.max_tokens
  int default_max_new_tokens = 256;
  int context_length = 8192;     // prompt + max_tokens must fit
};

struct RouterCounters {
  uint64_t submitted = 0;
  uint64_t refused = 0;
  uint64_t finished_stop = 0;
  uint64_t finished_length = 0;
  uint64_t cancelled = 0;
  uint64_t failed = 0;
  uint64_t reassigned_target = 0;
  uint64_t reassigned_draft = 0;
};

class RequestRouter {
 public:
  explicit RequestRouter(RouterOptions options) : options_(options) {}

  // Workers come and go; queued requests are placed as targets appear.
  void OnWorkerAlive(const proto::MemberStatus& member, const std::string& peer, std::vector<Outgoing>* out);
  void OnWorkerGone(uint64_t worker_id, std::vector<Outgoing>* out);

  // Client traffic. A refused submission gets an Error (with the reason) and a
  // finished TokenStream.
  void OnSubmit(const std::string& client_peer, const proto::SubmitRequest& submit, std::vector<Outgoing>* out);
  void OnCancel(const proto::Cancel& cancel, std::vector<Outgoing>* out);

  // Target traffic.
  void OnResult(const proto::VerifyResult& result, std::vector<Outgoing>* out);
  void OnWorkerError(const proto::Error& error, std::vector<Outgoing>* out);

  int queued() const;
  int running() const;
  const RouterCounters& counters() const { return counters_; }
  // The committed tokens the router holds for a request (empty if unknown).
  std::vector<int32_t> Committed(const std::string& request_id) const;

 private:
  enum class State { kQueued, kRunning, kFinished };
  struct Request {
    std::string client_peer;
    proto::SubmitRequest submit;
    std::vector<int32_t> committed;
    int prompt_length = 0;
    State state = State::kQueued;
    uint64_t target_id = 0;
    uint64_t draft_id = 0;
    uint64_t epoch = 0;
    int streamed = 0;  // committed tokens already sent to the client
    proto::SpecStats stats;
  };
  struct Worker {
    proto::Role role = proto::ROLE_UNSPECIFIED;
    std::string peer;
    std::string data_endpoint;
    int load = 0;
  };

  void Place(const std::string& id, Request& request, std::vector<Outgoing>* out);
  uint64_t LeastLoaded(proto::Role role) const;
  proto::Envelope MakeAssignment(const std::string& id, const Request& request) const;
  void SendToWorker(uint64_t worker_id, proto::Envelope envelope, std::vector<Outgoing>* out) const;
  void Stream(const std::string& id, Request& request, std::vector<Outgoing>* out);
  void Finish(const std::string& id, Request& request, proto::FinishReason reason, std::vector<Outgoing>* out);
  void Refuse(const std::string& client_peer, const std::string& id, proto::ErrorCode code,
              const std::string& message, std::vector<Outgoing>* out);

  RouterOptions options_;
  std::map<std::string, Request> requests_;
  std::map<uint64_t, Worker> workers_;
  RouterCounters counters_;
  uint64_t next_generated_id_ = 1;
};

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_REQUEST_ROUTER_H_
