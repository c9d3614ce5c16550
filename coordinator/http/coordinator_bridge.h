// CoordinatorBridge: the front door's one connection to the coordinator. A
// bridge thread owns the control-channel socket (a ZeroMQ DEALER; sockets are
// single-threaded); HTTP threads hand it work through a mutex-protected queue.
//
//   ASSIGN_OR_RETURN(auto bridge, CoordinatorBridge::Start("tcp://127.0.0.1:5555"));
//   bridge->Submit(submit, std::make_unique<MySink>(...));   // from any thread
//   bridge->Cancel(submit.request_id());                     // the client went away
//   bridge->QueryStatus([](absl::StatusOr<proto::StatusReply> s) { ... });
//   bridge->Drain(drain_request, [](absl::StatusOr<proto::DrainReply> r) { ... });
//
// It speaks the RequestClient protocol (SubmitRequest / Cancel out,
// TokenStream / Error in, StatusRequest / StatusReply, DrainRequest /
// DrainReply or Error), but keeps each error's
// code (for the HTTP status), forgets requests once they end (a server runs
// for months), and fans results out to one GenerationSink per request.
//
// Thread model: one bridge thread. Sinks and status callbacks run on it and
// must not block (posting to HttpServer is fine). Submit, Cancel, QueryStatus,
// Drain and Stop are thread-safe.
#ifndef SPLITSPEC_COORDINATOR_HTTP_COORDINATOR_BRIDGE_H_
#define SPLITSPEC_COORDINATOR_HTTP_COORDINATOR_BRIDGE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/base/mutex.h"
#include "runtime/net/channel.h"

namespace splitspec::coordinator::http {

// How a request ended. error_code is ERROR_CODE_UNSPECIFIED unless the
// coordinator or a worker reported an Error for it (then error_message says why).
struct GenerationOutcome {
  proto::FinishReason finish_reason = proto::FINISH_REASON_UNSPECIFIED;
  proto::SpecStats stats;
  proto::ErrorCode error_code = proto::ERROR_CODE_UNSPECIFIED;
  std::string error_message;
};

// Receives one request's results. Called on the bridge thread only.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // Newly committed tokens, in order (stream.tokens(), never empty here), with
  // their log probabilities when the request asked (stream.logprobs()), and the
  // request's SpecStats so far (stream.stats()).
  // Return false when the sink has finished its response by itself (a stop
  // string): the bridge cancels the request at the coordinator (freeing its KV
  // everywhere) and destroys the sink without calling it again.
  virtual bool OnTokens(const proto::TokenStream& stream) = 0;
  // The request ended: finished, refused, failed, cancelled by Cancel() (then
  // finish_reason is CANCELLED), or the bridge stopped (UNAVAILABLE). Called
  // exactly once, unless OnTokens returned false; the sink is destroyed after.
  virtual void OnFinished(const GenerationOutcome& outcome) = 0;
};

struct BridgeOptions {
  absl::Duration status_timeout = absl::Seconds(2);  // QueryStatus fails after this
};

// The request id of choice `index` of an HTTP request with n > 1 choices
// (each its own request at the coordinator): `request_id` itself for choice 0,
// "request_id#index" after it.
std::string ChoiceRequestId(const std::string& request_id, int index);

class CoordinatorBridge {
 public:
  using StatusCallback = std::function<void(absl::StatusOr<proto::StatusReply>)>;
  using DrainCallback = std::function<void(absl::StatusOr<proto::DrainReply>)>;

  // Connects (asynchronously: ZeroMQ queues until the coordinator is
  // reachable) and starts the bridge thread. Errors: ConnectChannel's.
  static absl::StatusOr<std::unique_ptr<CoordinatorBridge>> Start(
      const std::string& coordinator_endpoint, BridgeOptions options = {});
  // Stop() if not stopped.
  ~CoordinatorBridge();

  // Sends `submit` (its request_id must be unique among this bridge's
  // requests in flight, or the coordinator refuses it). The sink gets the results.
  void Submit(proto::SubmitRequest submit, std::unique_ptr<GenerationSink> sink);
  // Cancels a request in flight and its other choices (ChoiceRequestId(request_id,
  // i), i >= 1) (no-op otherwise); each sink gets OnFinished(CANCELLED) right away.
  void Cancel(const std::string& request_id);
  // Asks the coordinator for its membership table; `done` runs on the bridge
  // thread with the reply, or DeadlineExceeded after options.status_timeout.
  void QueryStatus(StatusCallback done);
  // Asks the coordinator to drain workers (proto DrainRequest); `done` runs on
  // the bridge thread with its DrainReply, its refusal (InvalidArgument,
  // NotFound or Unavailable with the coordinator's message), or
  // DeadlineExceeded after options.status_timeout.
  void Drain(proto::DrainRequest request, DrainCallback done);
  // Cancels every request in flight at the coordinator, finishes their sinks
  // with UNAVAILABLE, fails pending status queries, and joins the thread.
  // Later calls to Submit / Cancel / QueryStatus are dropped.
  void Stop();

  int in_flight() const { return in_flight_.load(); }

 private:
  struct Job {
    enum Kind { kSubmit, kCancel, kStatus, kDrain };
    Kind kind;
    proto::SubmitRequest submit;           // kSubmit
    std::unique_ptr<GenerationSink> sink;  // kSubmit
    std::string request_id;                // kCancel
    StatusCallback done;                   // kStatus
    proto::DrainRequest drain;             // kDrain
    DrainCallback drain_done;              // kDrain
  };
  struct Pending {
    std::unique_ptr<GenerationSink> sink;
    proto::ErrorCode error_code = proto::ERROR_CODE_UNSPECIFIED;
    std::string error_message;
  };

  CoordinatorBridge(std::unique_ptr<net::Channel> channel, BridgeOptions options, int wake_fd);
  void Enqueue(Job job);
  void Loop();
  void Wait();
  void RunJob(Job& job);
  void Receive();
  void OnTokenStream(const proto::TokenStream& stream);
  void SendCancel(const std::string& request_id);
  void ExpireStatusQueries(bool all);
  void Shutdown();

  const BridgeOptions options_;
  std::unique_ptr<net::Channel> channel_;  // bridge thread only
  const int wake_fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> in_flight_{0};
  std::thread thread_;

  // Bridge thread only.
  std::map<std::string, Pending> requests_;
  std::deque<std::pair<absl::Time, StatusCallback>> status_waiters_;  // oldest first
  // The coordinator answers drains in order: a DrainReply, or an Error with no request_id.
  std::deque<std::pair<absl::Time, DrainCallback>> drain_waiters_;  // oldest first

  Mutex mu_;
  // State below is protected by mu_.
  std::vector<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_COORDINATOR_BRIDGE_H_
