// SystemDeviceProbe: the CUDA runtime when this build has CUDA, else a probe
// that reports the build has none.
#include "runtime/model/device.h"

#if defined(SPLITSPEC_HAVE_CUDA)
#include "kernels/cuda/device_info.h"
#endif

namespace splitspec::model {
namespace {

class RuntimeProbe final : public DeviceProbe {
 public:
#if defined(SPLITSPEC_HAVE_CUDA)
  bool cuda_built() const override { return true; }
  int CudaDeviceCount() const override { return kernels::CudaVisibleDeviceCount(); }
  absl::StatusOr<DeviceMemoryInfo> QueryCuda(int ordinal) const override {
    absl::StatusOr<kernels::CudaDeviceMemory> memory = kernels::QueryCudaDeviceMemory(ordinal);
    if (!memory.ok()) return memory.status();
    return DeviceMemoryInfo{memory->name, memory->free_bytes, memory->total_bytes};
  }
#else
  bool cuda_built() const override { return false; }
  int CudaDeviceCount() const override { return 0; }
  absl::StatusOr<DeviceMemoryInfo> QueryCuda(int ordinal) const override {
    return absl::FailedPreconditionError("this splitspec was built without CUDA");
  }
#endif
};

}  // namespace

const DeviceProbe& SystemDeviceProbe() {
  static const RuntimeProbe* const probe = new RuntimeProbe();
  return *probe;
}

}  // namespace splitspec::model
