#include "runtime/net/request_client.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {

absl::StatusOr<proto::StatusReply> FetchCoordinatorStatus(const std::string& endpoint,
                                                          absl::Duration timeout) {
  static std::atomic<int> counter{0};
  ASSIGN_OR_RETURN(
      std::unique_ptr<Channel> channel,
      ConnectChannel(endpoint, absl::StrCat("status-", getpid(), "-", counter.fetch_add(1))));
  proto::Envelope request = NewEnvelope();
  request.mutable_status_request();
  RETURN_IF_ERROR(channel->Send("", request));
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<Frame> frame = channel->Receive(deadline - absl::Now());
    if (!frame.ok()) break;
    if (frame->envelope.has_status_reply()) return frame->envelope.status_reply();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no status reply from ", endpoint, " within ", absl::FormatDuration(timeout)));
}

absl::StatusOr<proto::DrainReply> RequestDrain(const std::string& endpoint,
                                               const proto::DrainRequest& request,
                                               absl::Duration timeout) {
  static std::atomic<int> counter{0};
  ASSIGN_OR_RETURN(
      std::unique_ptr<Channel> channel,
      ConnectChannel(endpoint, absl::StrCat("drain-", getpid(), "-", counter.fetch_add(1))));
  proto::Envelope envelope = NewEnvelope();
  *envelope.mutable_drain_request() = request;
  RETURN_IF_ERROR(channel->Send("", envelope));
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<Frame> frame = channel->Receive(deadline - absl::Now());
    if (!frame.ok()) break;
    if (frame->envelope.has_drain_reply()) return frame->envelope.drain_reply();
    if (frame->envelope.has_error()) {
      const proto::Error& error = frame->envelope.error();
      const std::string message = absl::StrCat("coordinator refused the drain: ", error.message());
      switch (error.code()) {
        case proto::ERROR_CODE_NOT_FOUND:
          return absl::NotFoundError(message);
        case proto::ERROR_CODE_UNAVAILABLE:
          return absl::UnavailableError(message);
        case proto::ERROR_CODE_INVALID_ARGUMENT:
          return absl::InvalidArgumentError(message);
        default:
          return absl::InternalError(message);
      }
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("no answer to DrainRequest from ", endpoint,
                                                  " within ", absl::FormatDuration(timeout)));
}

absl::StatusOr<std::unique_ptr<RequestClient>> RequestClient::Connect(
    const std::string& coordinator_endpoint) {
  static std::atomic<int> counter{0};
  ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel,
                   ConnectChannel(coordinator_endpoint,
                                  absl::StrCat("client-", getpid(), "-", counter.fetch_add(1))));
  return std::unique_ptr<RequestClient>(new RequestClient(std::move(channel)));
}

absl::Status RequestClient::Submit(const proto::SubmitRequest& submit) {
  if (submit.request_id().empty())
    return absl::InvalidArgumentError("SubmitRequest.request_id is empty");
  if (results_.contains(submit.request_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id '", submit.request_id(), "' already submitted"));
  }
  proto::Envelope envelope = NewEnvelope();
  *envelope.mutable_submit() = submit;
  RETURN_IF_ERROR(channel_->Send("", envelope));
  GenerationResult& result = results_[submit.request_id()];
  result.request_id = submit.request_id();
  result.submitted_at = absl::Now();
  return absl::OkStatus();
}

absl::Status RequestClient::Cancel(const std::string& request_id) {
  proto::Envelope envelope = NewEnvelope();
  envelope.mutable_cancel()->set_request_id(request_id);
  envelope.mutable_cancel()->set_reason("client cancelled");
  return channel_->Send("", envelope);
}

absl::Status RequestClient::Poll(
    absl::Duration budget,
    const std::function<void(const std::string&, const std::vector<int32_t>&)>& on_tokens) {
  // Wait up to `budget` for the first message, then drain what else is queued.
  absl::Duration wait = budget;
  while (true) {
    absl::StatusOr<Frame> frame = channel_->Receive(wait);
    wait = absl::ZeroDuration();
    if (!frame.ok())
      return absl::IsDeadlineExceeded(frame.status()) ? absl::OkStatus() : frame.status();
    const proto::Envelope& envelope = frame->envelope;
    if (envelope.has_error()) {
      auto it = results_.find(envelope.error().request_id());
      if (it != results_.end()) it->second.error = envelope.error().message();
      continue;
    }
    if (!envelope.has_token_stream()) continue;
    const proto::TokenStream& stream = envelope.token_stream();
    auto it = results_.find(stream.request_id());
    if (it == results_.end() || it->second.finished) continue;
    GenerationResult& result = it->second;
    std::vector<int32_t> tokens(stream.tokens().begin(), stream.tokens().end());
    if (!tokens.empty() && result.first_token_at == absl::InfinitePast())
      result.first_token_at = absl::Now();
    result.tokens.insert(result.tokens.end(), tokens.begin(), tokens.end());
    result.logprobs.insert(result.logprobs.end(), stream.logprobs().begin(),
                           stream.logprobs().end());
    result.stats = stream.stats();
    if (on_tokens && !tokens.empty()) on_tokens(stream.request_id(), tokens);
    if (stream.finished()) {
      result.finished = true;
      result.finish_reason = stream.finish_reason();
    }
  }
}

bool RequestClient::Done(const std::string& request_id) const {
  auto it = results_.find(request_id);
  return it != results_.end() && it->second.finished;
}

const GenerationResult& RequestClient::Result(const std::string& request_id) const {
  return results_.at(request_id);
}

absl::StatusOr<GenerationResult> RequestClient::Generate(
    const proto::SubmitRequest& submit, absl::Duration timeout,
    const std::function<void(const std::string&, const std::vector<int32_t>&)>& on_tokens) {
  RETURN_IF_ERROR(Submit(submit));
  const absl::Time deadline = absl::Now() + timeout;
  while (!Done(submit.request_id())) {
    if (absl::Now() >= deadline) {
      (void)Cancel(submit.request_id());
      return absl::DeadlineExceededError(absl::StrCat("request ", submit.request_id(),
                                                      " did not finish within ",
                                                      absl::FormatDuration(timeout)));
    }
    RETURN_IF_ERROR(Poll(std::min(absl::Milliseconds(50), deadline - absl::Now()), on_tokens));
  }
  return Result(submit.request_id());
}

}  // namespace splitspec::net
