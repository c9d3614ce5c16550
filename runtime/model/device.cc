#include "runtime/model/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/base/status_macros.h"

namespace splitspec::model {

std::string DeviceSpec::ToString() const {
  return is_cuda() ? absl::StrCat("cuda:", ordinal) : std::string("cpu");
}

absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text) {
  if (text == "cpu") return DeviceSpec{};
  absl::string_view rest = text;
  int ordinal = -1;
  const bool cuda_form = absl::ConsumePrefix(&rest, "cuda:") && !rest.empty() && rest.size() <= 3 &&
                         rest.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!cuda_form || !absl::SimpleAtoi(rest, &ordinal) || ordinal > kMaxCudaOrdinal) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", text, "' is not cpu or cuda:N (N in [0, ", kMaxCudaOrdinal, "])"));
  }
  return DeviceSpec{.kind = DeviceSpec::Kind::kCuda, .ordinal = ordinal};
}

absl::Status CheckDeviceExists(const DeviceSpec& device, const DeviceProbe& probe) {
  if (!device.is_cuda()) return absl::OkStatus();
  if (!probe.cuda_built()) {
    return absl::FailedPreconditionError(absl::StrCat(
        device.ToString(),
        ": this splitspec was built without CUDA (configure with -DSPLITSPEC_CUDA=ON)"));
  }
  const int count = probe.CudaDeviceCount();
  if (device.ordinal >= count) {
    return absl::FailedPreconditionError(absl::StrCat(device.ToString(), ": no such device (",
                                                      count, " CUDA device", count == 1 ? "" : "s",
                                                      " visible)"));
  }
  return absl::OkStatus();
}

absl::Status CheckDeviceFits(const DeviceSpec& device, const DeviceMemoryNeed& need,
                             const DeviceProbe& probe) {
  RETURN_IF_ERROR(CheckDeviceExists(device, probe));
  if (!device.is_cuda()) return absl::OkStatus();
  ASSIGN_OR_RETURN(DeviceMemoryInfo info, probe.QueryCuda(device.ordinal));
  if (need.total() <= info.free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(device.ToString(), " (", info.name, "): needs ", need.total(),
                   " bytes (weights ", need.weights, " + KV cache ", need.kv_cache, " + workspace ",
                   need.workspace, "), ", info.free_bytes, " bytes free of ", info.total_bytes));
}

}  // namespace splitspec::model
