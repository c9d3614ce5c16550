#include "target_worker/group_step_vote.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::target {

absl::Status AgreeOnStep(net::Communicator& comm, uint64_t step, const absl::Status& local,
                         absl::Status* agreed) {
  // A status code (0..16) is exact in a float.
  const float mine = static_cast<float>(static_cast<int>(local.code()));
  std::vector<float> codes(static_cast<size_t>(comm.size()));
  RETURN_IF_ERROR(comm.AllGather(&mine, 1, codes.data()));
  for (int rank = 0; rank < comm.size(); ++rank) {
    const int code = static_cast<int>(codes[rank]);
    if (code == 0) continue;
    if (rank == comm.rank()) {
      *agreed = absl::Status(local.code(), absl::StrCat("tp step ", step, ": rank ", rank,
                                                     " refused it: ", local.message()));
      return absl::OkStatus();
    }
    *agreed = absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat("tp step ", step, ": rank ", rank, " refused it (",
                                     absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
                                     "; its log says why)"));
    return absl::OkStatus();
  }
  *agreed = absl::OkStatus();
  return absl::OkStatus();
}

}  // namespace splitspec::target
