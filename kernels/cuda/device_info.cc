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

absl::StatusOr<double> MeasureCudaCopyBandwidth(int ordinal, uint64_t bytes, int repeats) {
  void* src = nullptr;
  void* dst = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  float best_ms = 0.0f;
  absl::Status status = CudaStatus(cudaSetDevice(ordinal), "cudaSetDevice", __FILE__, __LINE__);
  if (status.ok()) status = CudaStatus(cudaMalloc(&src, bytes), "cudaMalloc", __FILE__, __LINE__);
  if (status.ok()) status = CudaStatus(cudaMalloc(&dst, bytes), "cudaMalloc", __FILE__, __LINE__);
  if (status.ok()) status = CudaStatus(cudaMemset(src, 1, bytes), "cudaMemset", __FILE__, __LINE__);
  if (status.ok())
    status = CudaStatus(cudaEventCreate(&start), "cudaEventCreate", __FILE__, __LINE__);
  if (status.ok())
    status = CudaStatus(cudaEventCreate(&stop), "cudaEventCreate", __FILE__, __LINE__);
  for (int rep = -1; rep < repeats && status.ok(); ++rep) {  // rep -1: untimed warm-up
    status = CudaStatus(cudaEventRecord(start), "cudaEventRecord", __FILE__, __LINE__);
    if (status.ok()) {
      status = CudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice),
                          "cudaMemcpyAsync(device to device)", __FILE__, __LINE__);
    }
    if (status.ok())
      status = CudaStatus(cudaEventRecord(stop), "cudaEventRecord", __FILE__, __LINE__);
    if (status.ok()) {
      status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize", __FILE__, __LINE__);
    }
    float ms = 0.0f;
    if (status.ok()) {
      status = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime", __FILE__,
                          __LINE__);
    }
    if (status.ok() && rep >= 0 && (best_ms == 0.0f || ms < best_ms)) best_ms = ms;
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  cudaFree(src);
  cudaFree(dst);
  if (!status.ok()) {
    (void)cudaGetLastError();  // a failed call must not surface at the next launch check
    return absl::InternalError(absl::StrCat("cuda:", ordinal, ": ", status.message()));
  }
  if (best_ms <= 0.0f) {
    return absl::InternalError(
        absl::StrCat("cuda:", ordinal, ": a copy of ", bytes, " bytes timed at ", best_ms, " ms"));
  }
  return 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3) / 1e9;
}

}  // namespace splitspec::kernels
