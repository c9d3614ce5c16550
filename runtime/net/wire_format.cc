#include "runtime/net/wire_format.h"

#include "absl/strings/str_cat.h"

namespace splitspec::net {

proto::Envelope NewEnvelope() {
  proto::Envelope envelope;
  envelope.set_protocol_version(proto::PROTOCOL_VERSION_CURRENT);
  return envelope;
}

std::string EncodeEnvelope(const proto::Envelope& envelope) {
  std::string frame(kFrameMagic);
  if (envelope.protocol_version() == 0) {
    proto::Envelope stamped = envelope;
    stamped.set_protocol_version(proto::PROTOCOL_VERSION_CURRENT);
    stamped.AppendToString(&frame);
  } else {
    envelope.AppendToString(&frame);
  }
  return frame;
}

absl::StatusOr<proto::Envelope> DecodeEnvelope(absl::string_view frame) {
  if (frame.size() < kFrameMagic.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame of ", frame.size(), " bytes is shorter than the magic"));
  }
  if (frame.substr(0, kFrameMagic.size()) != kFrameMagic) {
    return absl::InvalidArgumentError("frame does not start with the magic \"SPSF\"");
  }
  frame.remove_prefix(kFrameMagic.size());
  proto::Envelope envelope;
  if (!envelope.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame payload of ", frame.size(), " bytes is not a valid Envelope"));
  }
  if (envelope.protocol_version() != proto::PROTOCOL_VERSION_CURRENT) {
    return absl::InvalidArgumentError(
        absl::StrCat("Envelope.protocol_version is ", envelope.protocol_version(),
                     ", this build speaks ", static_cast<int>(proto::PROTOCOL_VERSION_CURRENT)));
  }
  if (envelope.body_case() == proto::Envelope::BODY_NOT_SET) {
    return absl::InvalidArgumentError("Envelope has no body");
  }
  return envelope;
}

const char* BodyName(const proto::Envelope& envelope) {
  const auto* field = proto::Envelope::descriptor()->FindFieldByNumber(envelope.body_case());
  return field == nullptr ? "none" : field->name().c_str();
}

}  // namespace splitspec::net
