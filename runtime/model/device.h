// Where a model runs: the --device flag's value, and the start-up check that a
// model fits in the chosen device's memory.
//
//   ASSIGN_OR_RETURN(DeviceSpec device, ParseDeviceSpec("cuda:0"));
//   RETURN_IF_ERROR(CheckDeviceFits(device, need, SystemDeviceProbe()));
//
// Accepted values: "cpu" and "cuda:N" (N a decimal ordinal in [0, 255], counted
// among the devices CUDA_VISIBLE_DEVICES leaves visible). Refusals happen at
// start-up, before any weight is copied, and name the device and the numbers:
//   no CUDA in this build   FailedPrecondition "cuda:0: this splitspec was built
//                           without CUDA (configure with -DSPLITSPEC_CUDA=ON)"
//   no device / bad ordinal FailedPrecondition "cuda:3: no such device (2 CUDA
//                           devices visible)"
//   does not fit            ResourceExhausted "cuda:0 (NVIDIA H100): needs N bytes
//                           (weights W + KV cache K + workspace A), F bytes free of T"
// The free-memory query is behind DeviceProbe so that the refusal logic is
// tested on machines without a GPU (with a fake probe).
#ifndef SPLITSPEC_RUNTIME_MODEL_DEVICE_H_
#define SPLITSPEC_RUNTIME_MODEL_DEVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::model {

struct DeviceSpec {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int ordinal = 0;  // the CUDA device's index; 0 for the CPU

  bool is_cuda() const { return kind == Kind::kCuda; }
  // "cpu" or "cuda:N": ParseDeviceSpec(ToString()) gives back the same spec.
  std::string ToString() const;
  bool operator==(const DeviceSpec&) const = default;
};

// The largest CUDA ordinal accepted by the parser.
inline constexpr int kMaxCudaOrdinal = 255;

// Errors: InvalidArgument naming the value and the accepted forms.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text);

// Bytes a model needs on its device, by purpose (device_memory.h computes them).
struct DeviceMemoryNeed {
  uint64_t weights = 0;    // weights as stored on the device (quantized stays quantized)
  uint64_t kv_cache = 0;   // KV caches for the configured context and sequences
  uint64_t workspace = 0;  // activations and per-call metadata for the largest step
  uint64_t total() const { return weights + kv_cache + workspace; }
};

struct DeviceMemoryInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// What the machine has. SystemDeviceProbe() asks the CUDA runtime; tests pass fakes.
class DeviceProbe {
 public:
  virtual ~DeviceProbe() = default;
  // False when this build has no CUDA support at all.
  virtual bool cuda_built() const = 0;
  // CUDA devices visible to this process (0 without a driver or device).
  virtual int CudaDeviceCount() const = 0;
  // Name and memory of CUDA device `ordinal` (< CudaDeviceCount()). Errors:
  // Internal naming the device when the runtime's query fails.
  virtual absl::StatusOr<DeviceMemoryInfo> QueryCuda(int ordinal) const = 0;
};

// The CUDA runtime's view (device_probe.cc). Without CUDA in the build,
// cuda_built() is false and no device is visible.
const DeviceProbe& SystemDeviceProbe();

// OK when `device` exists and `need` fits in its free memory (the CPU always
// passes: host memory is not checked here). Errors as the header comment says.
absl::Status CheckDeviceFits(const DeviceSpec& device, const DeviceMemoryNeed& need,
                             const DeviceProbe& probe);

// OK when `device` exists (the checks of CheckDeviceFits without the memory).
absl::Status CheckDeviceExists(const DeviceSpec& device, const DeviceProbe& probe);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_DEVICE_H_
