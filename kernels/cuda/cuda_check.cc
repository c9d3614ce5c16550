#include "kernels/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace splitspec::kernels {

absl::Status CudaStatus(cudaError_t error, const char* statement, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();  // this failure is reported here; the next check must not see it
  return absl::InternalError(absl::StrCat(statement, " failed at ", file, ":", line, ": ",
                                          cudaGetErrorName(error), " (", cudaGetErrorString(error),
                                          ")"));
}

void IgnoreCudaError(cudaError_t error) {
  if (error != cudaSuccess) (void)cudaGetLastError();
}

void DiscardStaleCudaError() { (void)cudaGetLastError(); }

absl::Status CudaLaunchStatus(const char* kernel, const char* file, int line) {
  return CudaStatus(cudaGetLastError(), kernel, file, line);
}

bool CudaDeviceAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // "no driver" or "no device": consumed, never reported later
    return false;
  }
  return count > 0;
}

}  // namespace splitspec::kernels
