// What the CUDA runtime says about the visible devices: how many, their names
// and their free memory. Never aborts: a missing driver reads as no device.
//
//   int count = CudaVisibleDeviceCount();
//   ASSIGN_OR_RETURN(CudaDeviceMemory mem, QueryCudaDeviceMemory(0));
#ifndef SPLITSPEC_KERNELS_CUDA_DEVICE_INFO_H_
#define SPLITSPEC_KERNELS_CUDA_DEVICE_INFO_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace splitspec::kernels {

struct CudaDeviceMemory {
  std::string name;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// 0 without a driver or device (the runtime's sticky error is cleared).
int CudaVisibleDeviceCount();

// Makes `ordinal` the calling thread's device and reads its free and total
// memory (cudaMemGetInfo, after the context exists, so the context's own
// memory is already taken). Errors: Internal naming the call and the ordinal.
absl::StatusOr<CudaDeviceMemory> QueryCudaDeviceMemory(int ordinal);

// Device memory bandwidth of `ordinal` from device-to-device copies: the best of
// `repeats` cudaMemcpyAsync of `bytes` between two fresh buffers (after one
// untimed copy), timed with CUDA events, counting each byte read and written:
// 2 * bytes / seconds, in GB/s (1e9 bytes). What a weight-streaming forward can
// reach at most (bench decode prints its roofline from it). Errors: Internal
// naming the call and the ordinal (out of memory included); the buffers are
// freed on every path. REQUIRES: bytes > 0, repeats >= 1.
absl::StatusOr<double> MeasureCudaCopyBandwidth(int ordinal, uint64_t bytes, int repeats);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_DEVICE_INFO_H_
