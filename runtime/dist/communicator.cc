#include "runtime/dist/communicator.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net {

absl::Status ValidateCommunicatorOptions(const CommunicatorOptions& options) {
  if (options.group.empty()) return absl::InvalidArgumentError("communicator group name is empty");
  if (options.size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator size = ", options.size, " for group '", options.group, "', must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("communicator rank = ", options.rank,
                                                   " outside [0, ", options.size, ") for group '",
                                                   options.group, "'"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator timeout = ", absl::FormatDuration(options.timeout),
                     " for group '", options.group, "', must be positive"));
  }
  return absl::OkStatus();
}

absl::Status BroadcastString(Communicator& comm, std::string* message, int root) {
  if (comm.buffer_space() != BufferSpace::kHost) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BroadcastString needs a host-memory communicator, got ", comm.backend_name()));
  }
  int64_t length = comm.rank() == root ? static_cast<int64_t>(message->size()) : 0;
  RETURN_IF_ERROR(comm.Broadcast(&length, sizeof(length), root));
  message->resize(length);
  if (length == 0) return absl::OkStatus();
  return comm.Broadcast(message->data(), length, root);
}

}  // namespace splitspec::net
