#include "runtime/net/channel.h"

#include <zmq.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/net/mem_channel.h"
#include "runtime/net/wire_format.h"
#include "runtime/net/zmq_channel.h"

namespace splitspec::net {

absl::Status Channel::Send(absl::string_view peer, const proto::Envelope& envelope) {
  absl::Status status = SendBytes(peer, EncodeEnvelope(envelope));
  if (status.ok()) {
    frames_sent_.fetch_add(1, std::memory_order_relaxed);
  } else {
    send_failures_.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
}

absl::StatusOr<Frame> Channel::Receive(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<RawFrame> raw =
        ReceiveBytes(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!raw.ok()) return raw.status();
    if (raw->multipart) {
      malformed_frames_.fetch_add(1, std::memory_order_relaxed);
      SPLITSPEC_LOG(DEBUG) << "dropped multipart frame from '" << raw->peer << "'";
      continue;
    }
    absl::StatusOr<proto::Envelope> envelope = DecodeEnvelope(raw->bytes);
    if (!envelope.ok()) {
      malformed_frames_.fetch_add(1, std::memory_order_relaxed);
      SPLITSPEC_LOG(DEBUG) << "dropped frame from '" << raw->peer
                           << "': " << envelope.status().message();
      continue;
    }
    frames_received_.fetch_add(1, std::memory_order_relaxed);
    return Frame{std::move(raw->peer), *std::move(envelope), std::move(raw->peer_key),
                 std::move(raw->peer_address)};
  }
}

ChannelCounters Channel::counters() const {
  ChannelCounters c;
  c.frames_received = frames_received_.load(std::memory_order_relaxed);
  c.frames_sent = frames_sent_.load(std::memory_order_relaxed);
  c.malformed_frames = malformed_frames_.load(std::memory_order_relaxed);
  c.send_failures = send_failures_.load(std::memory_order_relaxed);
  return c;
}

proto::ChannelCounters Channel::CountersProto() const {
  const ChannelCounters c = counters();
  proto::ChannelCounters out;
  out.set_frames_received(c.frames_received);
  out.set_frames_sent(c.frames_sent);
  out.set_malformed_frames(c.malformed_frames);
  out.set_send_failures(c.send_failures);
  return out;
}

int WaitAnyReadable(const std::vector<Channel*>& channels, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<zmq_pollitem_t> items;
  bool all_zmq = true;
  for (Channel* channel : channels) {
    void* socket = channel->zmq_socket_handle();
    if (socket == nullptr) all_zmq = false;
    items.push_back({socket, 0, ZMQ_POLLIN, 0});
  }
  while (true) {
    for (size_t i = 0; i < channels.size(); ++i) {
      if (channels[i]->Readable()) return static_cast<int>(i);
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return -1;
    if (all_zmq && !items.empty()) {
      // Returns early when any socket has input; EINTR reads as "nothing yet".
      zmq_poll(items.data(), static_cast<int>(items.size()),
               std::max<long>(1, absl::ToInt64Milliseconds(left)));
      if (absl::Now() >= deadline) {
        for (size_t i = 0; i < channels.size(); ++i) {
          if (channels[i]->Readable()) return static_cast<int>(i);
        }
        return -1;
      }
    } else {
      absl::SleepFor(std::min(left, absl::Milliseconds(1)));
    }
  }
}

absl::StatusOr<std::unique_ptr<Channel>> ListenChannel(const std::string& endpoint) {
  return ListenChannel(endpoint, DefaultChannelSecurity());
}

absl::StatusOr<std::unique_ptr<Channel>> ListenChannel(const std::string& endpoint,
                                                       const ChannelSecurity& security) {
  if (absl::StartsWith(endpoint, "mem://")) return ListenMemChannel(endpoint);
  if (absl::StartsWith(endpoint, "tcp://") || absl::StartsWith(endpoint, "ipc://") ||
      absl::StartsWith(endpoint, "inproc://")) {
    return ListenZmqChannel(endpoint, security);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "endpoint '", endpoint, "' has no known scheme (tcp://, ipc://, inproc://, mem://)"));
}

absl::StatusOr<std::unique_ptr<Channel>> ConnectChannel(const std::string& endpoint,
                                                        const std::string& identity) {
  return ConnectChannel(endpoint, identity, DefaultChannelSecurity());
}

absl::StatusOr<std::unique_ptr<Channel>> ConnectChannel(const std::string& endpoint,
                                                        const std::string& identity,
                                                        const ChannelSecurity& security,
                                                        const std::string& server_key) {
  if (identity.empty())
    return absl::InvalidArgumentError("ConnectChannel: identity must not be empty");
  if (absl::StartsWith(endpoint, "mem://")) return ConnectMemChannel(endpoint, identity);
  if (absl::StartsWith(endpoint, "tcp://") || absl::StartsWith(endpoint, "ipc://") ||
      absl::StartsWith(endpoint, "inproc://")) {
    return ConnectZmqChannel(endpoint, identity, security,
                             server_key.empty() ? security.coordinator_public_key : server_key);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "endpoint '", endpoint, "' has no known scheme (tcp://, ipc://, inproc://, mem://)"));
}

}  // namespace splitspec::net
