// Fuzz target: decoding of the frames that arrive on ZeroMQ sockets
// (runtime/net/wire_format.h: "SPSF" + a protobuf Envelope;
// runtime/net/rendezvous_wire.h: the "SPKV" key-value frames), and the
// conversions a receiver applies to what it decoded (spec_proto.h).
// Properties, beyond "no crash, no memory error": a decoded envelope
// re-encodes to a frame that decodes to the same body; a decoded rendezvous
// message re-encodes to the same frame.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "runtime/net/rendezvous_wire.h"
#include "runtime/net/spec_proto.h"
#include "runtime/net/wire_format.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // protobuf logs each string field with invalid UTF-8 it refuses; a refusal is
  // an expected outcome here, not news.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  namespace net = splitspec::net;
  const absl::string_view frame(reinterpret_cast<const char*>(data), size);

  const auto envelope = net::DecodeEnvelope(frame);
  if (envelope.ok()) {
    FUZZ_CHECK(net::BodyName(*envelope) != nullptr, "body without a name");
    if (envelope->has_assignment())
      (void)net::SamplingParamsFromProto(envelope->assignment().params());
    if (envelope->has_submit()) (void)net::SamplingParamsFromProto(envelope->submit().params());
    if (envelope->has_draft_block()) {
      for (const auto& q : envelope->draft_block().q()) {
        (void)net::SparseFromProto(q).Validate(/*vocab=*/1 << 17);
      }
    }
    const auto again = net::DecodeEnvelope(net::EncodeEnvelope(*envelope));
    FUZZ_CHECK(again.ok(), "a decoded envelope does not decode after re-encoding");
    FUZZ_CHECK(again->body_case() == envelope->body_case(), "re-encoding changed the body");
  }

  const auto message = net::internal::DecodeRendezvousMessage(frame);
  if (message.ok()) {
    FUZZ_CHECK(net::internal::EncodeRendezvousMessage(*message) == frame,
               "a rendezvous frame does not re-encode to itself");
  }
  return 0;
}
