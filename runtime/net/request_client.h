// RequestClient: submits requests to a coordinator and collects their token
// streams. Used by `splitspec generate` (in-process cluster), `splitspec
// client` and the tests.
//
//   ASSIGN_OR_RETURN(auto client, RequestClient::Connect("tcp://127.0.0.1:5555"));
//   ASSIGN_OR_RETURN(GenerationResult result, client->Generate(submit, absl::Seconds(60)));
//
// Many requests may be in flight: Submit() each, then Poll() until Done().
// Thread safety: thread-compatible (one thread owns the client's socket).
#ifndef SPLITSPEC_RUNTIME_NET_REQUEST_CLIENT_H_
#define SPLITSPEC_RUNTIME_NET_REQUEST_CLIENT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/channel.h"

namespace splitspec::net {

struct GenerationResult {
  std::string request_id;
  std::vector<int32_t> tokens;  // generated tokens only
  // SamplingParams.logprobs: the entry of each of `tokens`, in order (fewer
  // only if the coordinator lost some: a caller checks the sizes).
  std::vector<proto::TokenLogprob> logprobs;
  proto::FinishReason finish_reason = proto::FINISH_REASON_UNSPECIFIED;
  proto::SpecStats stats;
  std::string error;  // the coordinator's or a worker's reason, if any
  bool finished = false;
  absl::Time submitted_at;
  absl::Time first_token_at = absl::InfinitePast();  // TTFT = first_token_at - submitted_at
};

// Asks the coordinator at `endpoint` for its membership table (a one-off
// connection). DeadlineExceeded if no reply comes within `timeout`.
absl::StatusOr<proto::StatusReply> FetchCoordinatorStatus(const std::string& endpoint,
                                                          absl::Duration timeout);

// Asks the coordinator at `endpoint` to drain workers (a one-off connection;
// see proto DrainRequest). Returns its DrainReply. Errors: the coordinator's
// refusal with its message (InvalidArgument, NotFound or Unavailable, as it
// coded it), or DeadlineExceeded if no answer comes within `timeout`.
absl::StatusOr<proto::DrainReply> RequestDrain(const std::string& endpoint,
                                               const proto::DrainRequest& request,
                                               absl::Duration timeout);

class RequestClient {
 public:
  static absl::StatusOr<std::unique_ptr<RequestClient>> Connect(
      const std::string& coordinator_endpoint);

  // Sends one request. InvalidArgument if its request_id is empty or in use here.
  absl::Status Submit(const proto::SubmitRequest& submit);
  // Asks the coordinator to cancel a request.
  absl::Status Cancel(const std::string& request_id);
  // Waits up to `budget` for traffic, then handles everything queued, updating results; `on_tokens`
  // (optional) sees each TokenStream's new tokens as they arrive.
  absl::Status Poll(absl::Duration budget,
                    const std::function<void(const std::string&, const std::vector<int32_t>&)>&
                        on_tokens = nullptr);
  bool Done(const std::string& request_id) const;
  const GenerationResult& Result(const std::string& request_id) const;  // REQUIRES: submitted here

  // Submit + Poll until finished. DeadlineExceeded (after a Cancel) if it takes
  // longer than `timeout`.
  absl::StatusOr<GenerationResult> Generate(
      const proto::SubmitRequest& submit, absl::Duration timeout,
      const std::function<void(const std::string&, const std::vector<int32_t>&)>& on_tokens =
          nullptr);

 private:
  explicit RequestClient(std::unique_ptr<Channel> channel) : channel_(std::move(channel)) {}
  std::unique_ptr<Channel> channel_;
  std::map<std::string, GenerationResult> results_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_REQUEST_CLIENT_H_
