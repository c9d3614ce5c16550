// Framing of the rendezvous key-value protocol between ChannelRendezvousStore
// (client) and RendezvousServer, carried as raw frames of a splitspec Channel
// (Channel::SendBytes / ReceiveBytes). Internal to runtime/net.
//
// The store is the one conversation that runs before a group has a
// communicator and must not depend on the service protocol's version, so it has
// its own magic ("SPKV") and never reaches Channel::Receive's envelope decoder.
//
// Frame: "SPKV" | op (1 byte) | request_id (8 bytes LE) | wait_ms (8 bytes LE)
//        | key length (4 bytes LE) | key | value length (4 bytes LE) | value
//
//   kSet      client -> server  publish key = value          -> kSetDone, or kRefused
//                                                                if the key is set already
//   kGet      client -> server  value of key, waiting up to wait_ms -> kValue or kMissing
//   kSetDone, kValue, kMissing, kRefused  server -> client, same request_id
#ifndef SPLITSPEC_RUNTIME_NET_RENDEZVOUS_WIRE_H_
#define SPLITSPEC_RUNTIME_NET_RENDEZVOUS_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::net::internal {

inline constexpr absl::string_view kRendezvousMagic = "SPKV";
// Keys and values above this size are refused (addresses and NCCL ids are ~100 bytes).
inline constexpr uint32_t kRendezvousMaxFieldBytes = 1 << 20;

enum class RendezvousOp : uint8_t {
  kSet = 1,
  kGet = 2,
  kSetDone = 3,
  kValue = 4,
  kMissing = 5,
  kRefused = 6,
};

struct RendezvousMessage {
  RendezvousOp op = RendezvousOp::kGet;
  uint64_t request_id = 0;
  int64_t wait_ms = 0;  // kGet only
  std::string key;
  std::string value;  // kSet and kValue
};

std::string EncodeRendezvousMessage(const RendezvousMessage& message);

// Errors: InvalidArgument saying what is wrong (short frame, bad magic, unknown
// op, a length past the end or over kRendezvousMaxFieldBytes, trailing bytes).
absl::StatusOr<RendezvousMessage> DecodeRendezvousMessage(absl::string_view frame);

}  // namespace splitspec::net::internal

#endif  // SPLITSPEC_RUNTIME_NET_RENDEZVOUS_WIRE_H_
