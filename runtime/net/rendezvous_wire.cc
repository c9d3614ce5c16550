#include "runtime/net/rendezvous_wire.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net::internal {
namespace {

template <typename T>
void PutLittleEndian(T value, std::string* out) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff));
  }
}

// Reads fields front to back; every read checks the remaining length.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}

  template <typename T>
  absl::Status Read(const char* field, T* value) {
    if (rest_.size() < sizeof(T)) {
      return absl::InvalidArgumentError(absl::StrCat("rendezvous frame ends inside ", field));
    }
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(rest_[i])) << (8 * i);
    }
    *value = static_cast<T>(v);
    rest_.remove_prefix(sizeof(T));
    return absl::OkStatus();
  }

  absl::Status ReadString(const char* field, std::string* value) {
    uint32_t length = 0;
    RETURN_IF_ERROR(Read(field, &length));
    if (length > kRendezvousMaxFieldBytes || length > rest_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous ", field, " length ", length, " exceeds the ", rest_.size(),
                       " bytes left (limit ", kRendezvousMaxFieldBytes, ")"));
    }
    value->assign(rest_.data(), length);
    rest_.remove_prefix(length);
    return absl::OkStatus();
  }

  size_t remaining() const { return rest_.size(); }

 private:
  absl::string_view rest_;
};

bool IsKnownOp(uint8_t op) {
  return op >= static_cast<uint8_t>(RendezvousOp::kSet) &&
         op <= static_cast<uint8_t>(RendezvousOp::kRefused);
}

}  // namespace

std::string EncodeRendezvousMessage(const RendezvousMessage& message) {
  std::string out(kRendezvousMagic);
  out.push_back(static_cast<char>(message.op));
  PutLittleEndian<uint64_t>(message.request_id, &out);
  PutLittleEndian<int64_t>(message.wait_ms, &out);
  PutLittleEndian<uint32_t>(static_cast<uint32_t>(message.key.size()), &out);
  out += message.key;
  PutLittleEndian<uint32_t>(static_cast<uint32_t>(message.value.size()), &out);
  out += message.value;
  return out;
}

absl::StatusOr<RendezvousMessage> DecodeRendezvousMessage(absl::string_view frame) {
  if (frame.substr(0, kRendezvousMagic.size()) != kRendezvousMagic) {
    return absl::InvalidArgumentError("rendezvous frame does not start with \"SPKV\"");
  }
  Reader reader(frame.substr(kRendezvousMagic.size()));
  RendezvousMessage message;
  uint8_t op = 0;
  RETURN_IF_ERROR(reader.Read("op", &op));
  if (!IsKnownOp(op)) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous frame has unknown op ", op));
  }
  message.op = static_cast<RendezvousOp>(op);
  RETURN_IF_ERROR(reader.Read("request_id", &message.request_id));
  RETURN_IF_ERROR(reader.Read("wait_ms", &message.wait_ms));
  RETURN_IF_ERROR(reader.ReadString("key", &message.key));
  RETURN_IF_ERROR(reader.ReadString("value", &message.value));
  if (reader.remaining() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous frame has ", reader.remaining(), " trailing bytes"));
  }
  return message;
}

}  // namespace splitspec::net::internal
