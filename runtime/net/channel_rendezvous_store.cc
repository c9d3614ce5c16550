#include "runtime/net/channel_rendezvous_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/rendezvous_wire.h"

namespace splitspec::net {

using internal::RendezvousMessage;
using internal::RendezvousOp;

ChannelRendezvousStore::ChannelRendezvousStore(std::unique_ptr<Channel> channel,
                                               absl::Duration reply_timeout)
    : channel_(std::move(channel)), reply_timeout_(reply_timeout) {}

absl::StatusOr<std::string> ChannelRendezvousStore::Call(RendezvousOp op, const std::string& key,
                                                         std::string value, absl::Duration wait,
                                                         absl::Duration timeout,
                                                         RendezvousOp* reply_op) {
  RendezvousMessage request;
  request.op = op;
  request.request_id = next_request_id_++;
  request.wait_ms = absl::ToInt64Milliseconds(wait);
  request.key = key;
  request.value = std::move(value);
  RETURN_IF_ERROR(channel_->SendBytes("", internal::EncodeRendezvousMessage(request)));
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<RawFrame> frame = channel_->ReceiveBytes(left);
    if (!frame.ok()) {
      if (absl::IsDeadlineExceeded(frame.status())) break;
      return frame.status();
    }
    absl::StatusOr<RendezvousMessage> reply = internal::DecodeRendezvousMessage(frame->bytes);
    if (!reply.ok() || reply->request_id != request.request_id) continue;  // stale or garbage
    *reply_op = reply->op;
    return std::move(reply->value);
  }
  return absl::UnavailableError(absl::StrCat("rendezvous server at ", location(),
                                             " did not answer about key '", key, "' within ",
                                             absl::FormatDuration(timeout)));
}

absl::Status ChannelRendezvousStore::Set(const std::string& key, absl::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key is empty");
  RendezvousOp reply_op = RendezvousOp::kMissing;
  ASSIGN_OR_RETURN(std::string ignored, Call(RendezvousOp::kSet, key, std::string(value),
                                             absl::ZeroDuration(), reply_timeout_, &reply_op));
  if (reply_op == RendezvousOp::kRefused) {
    return absl::AlreadyExistsError(
        absl::StrCat("rendezvous key '", key, "' is already set at ", location()));
  }
  if (reply_op != RendezvousOp::kSetDone) {
    return absl::UnavailableError(absl::StrCat("rendezvous server at ", location(), " answered op ",
                                               static_cast<int>(reply_op), " to a set of '", key,
                                               "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChannelRendezvousStore::Get(const std::string& key,
                                                        absl::Duration timeout) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key is empty");
  RendezvousOp reply_op = RendezvousOp::kMissing;
  ASSIGN_OR_RETURN(std::string value,
                   Call(RendezvousOp::kGet, key, "", timeout, timeout + reply_timeout_, &reply_op));
  if (reply_op == RendezvousOp::kValue) return value;
  if (reply_op == RendezvousOp::kMissing) {
    return absl::DeadlineExceededError(absl::StrCat("rendezvous key '", key, "' not set at ",
                                                    location(), " within ",
                                                    absl::FormatDuration(timeout)));
  }
  return absl::UnavailableError(absl::StrCat("rendezvous server at ", location(), " answered op ",
                                             static_cast<int>(reply_op), " to a get of '", key,
                                             "'"));
}

absl::StatusOr<std::unique_ptr<RendezvousStore>> ConnectRendezvousStore(
    const std::string& endpoint, const std::string& identity, absl::Duration reply_timeout,
    const std::string& server_key) {
  // The rendezvous server runs in a target group's leader: it holds that leader's key.
  const ChannelSecurity security = DefaultChannelSecurity();
  ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel,
                   ConnectChannel(endpoint, identity, security,
                                  server_key.empty() ? security.target_public_key : server_key));
  return std::unique_ptr<RendezvousStore>(
      new ChannelRendezvousStore(std::move(channel), reply_timeout));
}

}  // namespace splitspec::net
