#include "kernels/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace splitspec::kernels {

absl::Status CudaStatus(cudaError_t error, const char* statement, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(statement, " failed at ", file, ":", line, ": ",
                                          cudaGetErrorName(error), " (", cudaGetErrorString(error),
                                          ")"));
}

bool CudaDeviceAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return false;
  }
  return count > 0;
}

}  // namespace splitspec::kernels
