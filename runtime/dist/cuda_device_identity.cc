#include "runtime/dist/cuda_device_identity.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::net {

absl::StatusOr<std::string> CudaDeviceUuid(int ordinal) {
  cudaDeviceProp properties{};
  const cudaError_t error = cudaGetDeviceProperties(&properties, ordinal);
  if (error != cudaSuccess) {
    kernels::IgnoreCudaError(error);  // reported here; a later launch check must not see it
    return absl::InternalError(
        absl::StrCat("cuda:", ordinal, ": cannot read its UUID: ", cudaGetErrorString(error)));
  }
  // nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  std::string uuid = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
    absl::StrAppendFormat(&uuid, "%02x", static_cast<unsigned char>(properties.uuid.bytes[i]));
  }
  return uuid;
}

}  // namespace splitspec::net
