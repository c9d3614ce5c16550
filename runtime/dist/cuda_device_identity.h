// CudaDeviceUuid: the UUID of a CUDA device ("GPU-1c2f3a4b-..."), the identity
// that tells two ranks apart when CUDA_VISIBLE_DEVICES gives both ordinal 0
// (tp_transport.h compares ranks by host and UUID). CUDA builds only
// (library splitspec_dist_cuda).
#ifndef SPLITSPEC_RUNTIME_DIST_CUDA_DEVICE_IDENTITY_H_
#define SPLITSPEC_RUNTIME_DIST_CUDA_DEVICE_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"

namespace splitspec::net {

// Errors: Internal naming the ordinal and CUDA's error (no such device, no driver).
absl::StatusOr<std::string> CudaDeviceUuid(int ordinal);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_CUDA_DEVICE_IDENTITY_H_
