// RequestRouter: the coordinator's request lifecycle and placement policy.
//
// Lifecycle (docs/architecture.md): queued -> running -> finished, exactly once (stop,
// length, cancellation or error). The router keeps every request's committed
// tokens, so a request whose target dies is re-placed and re-prefilled from
// them, and a request whose draft worker dies gets another one (or none: the
// target then decodes alone). Placement is least-loaded by the router's own
// count of running requests per worker, among the target groups whose free KV
// cache (reported in heartbeats, less the prompts placed there since) holds the
// request's committed tokens when any does; otherwise among all (the request
// then waits for room in that target's own queue, target_engine.h).
//
// Draining (run-time scale-down, DrainRequest): a draining worker gets no new
// placements. A draining draft worker's requests move at once to the other
// draft workers (or to none). A draining target group keeps its running
// requests until they finish or until its drain deadline, when the remaining
// ones are re-placed from their committed tokens like those of a dead target.
// A draining worker that holds no request any more is sent Drain, after which
// it deregisters (a group leader disbands its followers as it leaves; they are
// shown DRAINING meanwhile). Results and errors are taken only
// from the worker currently serving a request, so a drained target's late
// results never mix into the re-placed request.
//
// No request waits forever: a submission while no target group serves (none
// registered, all dead or draining) is refused at once (UNAVAILABLE), and a
// request queued because its target died with no other to take it fails
// (UNAVAILABLE, naming the wait) once it has waited RouterOptions.queue_timeout.
//
// Pure policy: no sockets. Every decision is returned as Outgoing messages
// (addressed by ZeroMQ peer identity) for the service to send.
//
// Thread safety: thread-compatible (the coordinator's control thread owns it).
#ifndef SPLITSPEC_COORDINATOR_REQUEST_ROUTER_H_
#define SPLITSPEC_COORDINATOR_REQUEST_ROUTER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"

namespace splitspec::coordinator {

struct Outgoing {
  std::string peer;  // control-channel identity of a worker or client
  proto::Envelope envelope;
};

struct RouterOptions {
  int max_queued = 256;       // waiting requests before submissions are refused
  int max_new_tokens = 4096;  // upper bound on SamplingParams.max_tokens
  int default_max_new_tokens = 256;
  int context_length = 8192;  // prompt + max_tokens must fit
  // How long a draining target group's running requests may take to finish
  // before they are re-placed (DrainRequest.timeout_ms overrides it).
  absl::Duration drain_timeout = absl::Seconds(30);
  // How long a queued request (its target gone, no other there) may wait for
  // a target group before it fails.
  absl::Duration queue_timeout = absl::Seconds(30);
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
  uint64_t drained = 0;          // workers sent Drain (group leaders: followers leave with them)
  uint64_t ignored_results = 0;  // results or errors from a worker no longer serving the request
  uint64_t timed_out = 0;        // queued requests failed after queue_timeout
};

class RequestRouter {
 public:
  explicit RequestRouter(RouterOptions options) : options_(options) {}

  // Workers come and go; queued requests are placed as targets appear.
  void OnWorkerAlive(const proto::MemberStatus& member, const std::string& peer,
                     std::vector<Outgoing>* out);
  void OnWorkerGone(uint64_t worker_id, std::vector<Outgoing>* out);
  // A worker's heartbeat load: a target leader's free KV cache is kept for placement.
  void OnWorkerLoad(uint64_t worker_id, const proto::LoadReport& load);

  // Client traffic. A refused submission gets an Error (with the reason) and a
  // finished TokenStream; with no target group serving, it is refused
  // UNAVAILABLE at once. A submission without request_id gets an unguessable
  // one ("req-" and 128 random bits).
  void OnSubmit(const std::string& client_peer, const proto::SubmitRequest& submit,
                std::vector<Outgoing>* out);
  // Only the client that submitted a request may cancel it: PermissionDenied
  // (nothing changes) when `client_peer` is another; an unknown id is ignored.
  absl::Status OnCancel(const std::string& client_peer, const proto::Cancel& cancel,
                        std::vector<Outgoing>* out);

  // Worker traffic; `peer` is the sender's control-channel identity. Traffic
  // from a worker that no longer serves the request is ignored and counted.
  void OnResult(const std::string& peer, const proto::VerifyResult& result,
                std::vector<Outgoing>* out);
  void OnWorkerError(const std::string& peer, const proto::Error& error,
                     std::vector<Outgoing>* out);
  // False when `request_id` is a running request that `peer` does not serve:
  // its results and errors would be ignored (a worker it was taken from, or a
  // forgery). True for an unknown or finished request (nothing to protect).
  bool Holds(const std::string& request_id, const std::string& peer) const;

  // Starts draining the workers `request` names (see the top of this file and
  // proto DrainRequest); `now` starts the target groups' drain deadline.
  // Returns the ids now draining: the chosen draft workers and group leaders,
  // then the followers of those groups. Draining an already draining worker by
  // id is not an error. Errors (nothing changes then), each naming the field:
  //   InvalidArgument: neither or both of count and worker_ids; count without
  //     a worker role; an id of a tensor-parallel follower or of the wrong role.
  //   NotFound: an id that is not a live draft worker or group leader.
  //   Unavailable: count exceeds the workers of that role not already
  //     draining; or it would leave no target group that is not draining
  //     (the cluster would refuse every request) unless request.force(); even
  //     forced, not while requests are queued or running (a request must never
  //     be stranded).
  absl::StatusOr<std::vector<uint64_t>> StartDrain(const proto::DrainRequest& request,
                                                   absl::Time now, std::vector<Outgoing>* out);
  // Re-places the requests of draining target groups past their deadline (if
  // another target group is there to take them; else they finish in place),
  // fails requests queued longer than queue_timeout, and sends Drain to
  // draining workers that hold no request. Call it often (the coordinator does
  // at every liveness sweep).
  void Tick(absl::Time now, std::vector<Outgoing>* out);
  bool IsDraining(uint64_t worker_id) const;

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
    // SamplingParams.logprobs: the entries of committed[prompt_length + i],
    // contiguous (from the targets' results; kept across re-placements).
    std::vector<proto::TokenLogprob> logprobs;
    absl::Time queued_since = absl::InfiniteFuture();  // first Tick that saw it queued
  };
  struct Worker {
    proto::Role role = proto::ROLE_UNSPECIFIED;
    std::string peer;
    std::string data_endpoint;
    std::string tp_group;  // "" when not tensor-parallel
    bool runs_trees = false;  // Capabilities.runs_trees (targets): drafts may send it trees
    int load = 0;
    // Target leaders with a KV budget: the bytes free at the last heartbeat,
    // less the prompts placed since; unset: no budget reported (room assumed).
    std::optional<uint64_t> kv_free_bytes;
    uint64_t kv_bytes_per_position = 0;
    bool draining = false;
    bool drain_sent = false;
    absl::Time drain_deadline = absl::InfiniteFuture();  // targets: re-place what is left after it
    std::string drain_reason;
  };
  struct Follower {  // a target group's rank > 0: never placed on, drained with its leader
    std::string peer;
    std::string tp_group;
  };

  void Place(const std::string& id, Request& request, std::vector<Outgoing>* out);
  // Moves a running request to another draft worker (or none); `release_old`
  // tells the old one to drop it (it is alive: draining).
  void ReplaceDraft(const std::string& id, Request& request, bool release_old,
                    std::vector<Outgoing>* out);
  // Re-queues a running request and places it again from its committed tokens.
  void ReplaceTarget(const std::string& id, Request& request, const std::string& reason,
                     std::vector<Outgoing>* out);
  bool ServedBy(const Request& request, const std::string& peer) const;
  bool HoldsRequests(uint64_t worker_id) const;
  void SendDrains(std::vector<Outgoing>* out);
  void FailStaleQueued(absl::Time now, std::vector<Outgoing>* out);
  uint64_t LeastLoaded(proto::Role role) const;
  // The target group for `request`: LeastLoaded among those with KV room for
  // its committed tokens, if any has; else LeastLoaded. 0 if none serves.
  uint64_t ChooseTarget(const Request& request) const;
  proto::Envelope MakeAssignment(const std::string& id, const Request& request) const;
  void SendToWorker(uint64_t worker_id, proto::Envelope envelope, std::vector<Outgoing>* out) const;
  void Stream(const std::string& id, Request& request, std::vector<Outgoing>* out);
  // Appends the result's logprobs entries that continue request.logprobs.
  static void MergeLogprobs(const proto::VerifyResult& result, Request& request);
  void Finish(const std::string& id, Request& request, proto::FinishReason reason,
              std::vector<Outgoing>* out);
  void Refuse(const std::string& client_peer, const std::string& id, proto::ErrorCode code,
              const std::string& message, std::vector<Outgoing>* out);

  RouterOptions options_;
  std::map<std::string, Request> requests_;
  std::map<uint64_t, Worker> workers_;  // draft workers and target group leaders
  std::map<uint64_t, Follower> followers_;
  RouterCounters counters_;
};

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_REQUEST_ROUTER_H_
