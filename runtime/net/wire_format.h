// Framing of protobuf messages on the wire.
//
// One message = one frame = "SPSF" (4 bytes of magic) + a serialized
// proto::Envelope whose protocol_version is PROTOCOL_VERSION_CURRENT and whose
// body is set. The magic lets a receiver reject stray or garbage traffic
// cheaply before parsing.
//
//   std::string frame = EncodeEnvelope(envelope);
//   absl::StatusOr<proto::Envelope> back = DecodeEnvelope(frame);
#ifndef SPLITSPEC_RUNTIME_NET_WIRE_FORMAT_H_
#define SPLITSPEC_RUNTIME_NET_WIRE_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/splitspec.pb.h"

namespace splitspec::net {

inline constexpr absl::string_view kFrameMagic = "SPSF";
// Frames larger than this are refused by receivers (ZeroMQ drops the peer's message).
inline constexpr int64_t kMaxFrameBytes = 64 << 20;

// Returns an envelope with protocol_version set to the current version.
proto::Envelope NewEnvelope();

// Serializes `envelope` behind the magic. The version is stamped if unset.
std::string EncodeEnvelope(const proto::Envelope& envelope);

// Parses a frame. Errors (InvalidArgument, message says which): too short, bad
// magic, unparsable protobuf, wrong protocol_version, no body.
absl::StatusOr<proto::Envelope> DecodeEnvelope(absl::string_view frame);

// Name of the envelope's body case ("heartbeat", "draft_block", ...) for logs.
const char* BodyName(const proto::Envelope& envelope);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_WIRE_FORMAT_H_
