#include "kernels/cuda/device_info.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {

int CudaVisibleDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

absl::StatusOr<CudaDeviceMemory> QueryCudaDeviceMemory(int ordinal) {
  cudaDeviceProp prop{};
  absl::Status status = CudaStatus(cudaGetDeviceProperties(&prop, ordinal),
                                   "cudaGetDeviceProperties", __FILE__, __LINE__);
  if (status.ok()) status = CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice", __FILE__, __LINE__);
  CudaDeviceMemory memory;
  size_t free_bytes = 0, total_bytes = 0;
  if (status.ok()) {
    status =
        CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", __FILE__, __LINE__);
  }
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cuda:", ordinal, ": ", status.message()));
  }
  memory.name = prop.name;
  memory.free_bytes = free_bytes;
  memory.total_bytes = total_bytes;
  return memory;
}

}  // namespace splitspec::kernels
