// CUDA error conversion: foreign errors become absl::Status once, here.
//
//   CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
//
// The status message names the statement, file and line and CUDA's own text.
#ifndef SPLITSPEC_KERNELS_CUDA_CUDA_CHECK_H_
#define SPLITSPEC_KERNELS_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace splitspec::kernels {

// OK for cudaSuccess; otherwise an Internal error naming `statement`, `file`, `line`.
absl::Status CudaStatus(cudaError_t error, const char* statement, const char* file, int line);

// True if at least one CUDA device can be used by this process. Never fails:
// a missing driver or device reads as "no device".
bool CudaDeviceAvailable();

}  // namespace splitspec::kernels

#define CUDA_RETURN_IF_ERROR(stmt)                                           \
  do {                                                                       \
    ::absl::Status splitspec_cuda_status_ =                                  \
        ::splitspec::kernels::CudaStatus((stmt), #stmt, __FILE__, __LINE__); \
    if (!splitspec_cuda_status_.ok()) return splitspec_cuda_status_;         \
  } while (0)

#endif  // SPLITSPEC_KERNELS_CUDA_CUDA_CHECK_H_
