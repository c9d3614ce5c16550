#include "runtime/net/ordered_outbox.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::net {

absl::Status OrderedOutbox::Send(Channel& channel, proto::Envelope envelope) {
  if (pending_.size() >= max_pending_) {
    return absl::ResourceExhaustedError(absl::StrCat("outbox to '", peer_, "' on ",
                                                     channel.endpoint(), " holds ", pending_.size(),
                                                     " unsent envelopes; dropping this one"));
  }
  pending_.push_back(std::move(envelope));
  return Flush(channel);
}

absl::Status OrderedOutbox::Flush(Channel& channel) {
  while (!pending_.empty()) {
    const absl::Status sent = channel.Send(peer_, pending_.front());
    if (absl::IsResourceExhausted(sent))
      return absl::OkStatus();  // still queued; retried next time
    pending_.pop_front();
    if (!sent.ok()) return sent;
  }
  return absl::OkStatus();
}

}  // namespace splitspec::net
