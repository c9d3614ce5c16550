// CUDA error conversion: foreign errors become absl::Status once, here.
//
//   CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
//
//   DiscardStaleCudaError();
//   MyKernel<<<grid, block, 0, stream>>>(...);
//   return CudaLaunchStatus("MyKernel", __FILE__, __LINE__);
//
// The status message names the statement, file and line and CUDA's own text.
//
// Why the consuming: the runtime keeps the last failed call's error per host thread,
// and a kernel launch returns nothing: its error is read with cudaGetLastError, which
// also returns an earlier call's error that nobody consumed. Left there, a handled
// failure (a bad ordinal probed on purpose, a cudaMalloc refused) would fail the next,
// unrelated launch check, and a serving process its next request (GPU_FIRST_RUN.md).
// So every failed call converted here consumes its own error, calls whose result is
// ignored go through IgnoreCudaError, and launchers discard a stale error before
// launching. Sticky errors (the context is lost) cannot be consumed: every later call
// reports them, as it must.
#ifndef SPLITSPEC_KERNELS_CUDA_CUDA_CHECK_H_
#define SPLITSPEC_KERNELS_CUDA_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace splitspec::kernels {

// OK for cudaSuccess; otherwise an Internal error naming `statement`, `file`, `line`,
// and the error is consumed (the thread's last error is reset).
absl::Status CudaStatus(cudaError_t error, const char* statement, const char* file, int line);

// For a call whose failure is harmless and deliberately ignored (cleanup in a
// destructor): consumes its error so that no later check reports it.
void IgnoreCudaError(cudaError_t error);

// Resets the thread's last CUDA error left by an earlier failed call, so that the
// launch that follows is judged alone. Launchers call it right before <<<...>>>.
void DiscardStaleCudaError();

// The status of the launch just made on this thread (cudaGetLastError), naming `kernel`.
absl::Status CudaLaunchStatus(const char* kernel, const char* file, int line);

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
