#include "runtime/dist/nccl_check.h"

#include "absl/strings/str_cat.h"

namespace splitspec::net {

absl::Status NcclStatus(ncclResult_t result, const char* statement, const char* file, int line) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  const std::string message =
      absl::StrCat(statement, " failed at ", file, ":", line, ": ", ncclGetErrorString(result),
                   " (ncclResult ", static_cast<int>(result), ")");
  if (result == ncclRemoteError || result == ncclSystemError) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

}  // namespace splitspec::net
