// NCCL error conversion: NCCL's result codes become absl::Status once, here.
//
//   NCCL_RETURN_IF_ERROR(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream));
//
// The message names the statement, file, line and NCCL's own text
// (ncclGetErrorString, plus ncclGetLastError's detail when it has one).
// Built only with CUDA (library splitspec_nccl).
#ifndef SPLITSPEC_RUNTIME_DIST_NCCL_CHECK_H_
#define SPLITSPEC_RUNTIME_DIST_NCCL_CHECK_H_

#include <nccl.h>

#include "absl/status/status.h"

namespace splitspec::net {

// OK for ncclSuccess (and ncclInProgress, which a non-blocking communicator
// returns for work it has queued); Unavailable for ncclRemoteError and
// ncclSystemError (a peer or the network failed), Internal otherwise.
absl::Status NcclStatus(ncclResult_t result, const char* statement, const char* file, int line);

}  // namespace splitspec::net

#define NCCL_RETURN_IF_ERROR(stmt)                                       \
  do {                                                                   \
    ::absl::Status splitspec_nccl_status_ =                              \
        ::splitspec::net::NcclStatus((stmt), #stmt, __FILE__, __LINE__); \
    if (!splitspec_nccl_status_.ok()) return splitspec_nccl_status_;     \
  } while (0)

#endif  // SPLITSPEC_RUNTIME_DIST_NCCL_CHECK_H_
