#include "runtime/dist/host_staged_communicator.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net {

absl::Status HostStagedCommunicator::CheckInner() const {
  if (inner_ == nullptr || inner_->buffer_space() != BufferSpace::kHost) {
    return absl::FailedPreconditionError(
        absl::StrCat("a host-staged communicator needs a host-memory inner communicator, got ",
                     inner_ == nullptr ? "none" : inner_->backend_name()));
  }
  return absl::OkStatus();
}

HostStagedCommunicator::~HostStagedCommunicator() {
  if (stream_ == nullptr) return;
  kernels::IgnoreCudaError(cudaSetDevice(device_));
  kernels::IgnoreCudaError(cudaStreamDestroy(stream_));
}

absl::Status HostStagedCommunicator::Prepare() {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  if (stream_ == nullptr) {
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  return absl::OkStatus();
}

absl::Status HostStagedCommunicator::Copy(void* dst, const void* src, size_t bytes,
                                          cudaMemcpyKind kind) {
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status HostStagedCommunicator::AllReduceSum(float* data, int64_t count) {
  RETURN_IF_ERROR(CheckInner());
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("all_reduce count = ", count));
  if (count == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Prepare());
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  host_in_.resize(count);
  RETURN_IF_ERROR(Copy(host_in_.data(), data, bytes, cudaMemcpyDeviceToHost));
  RETURN_IF_ERROR(inner_->AllReduceSum(host_in_.data(), count));
  return Copy(data, host_in_.data(), bytes, cudaMemcpyHostToDevice);
}

absl::Status HostStagedCommunicator::AllGather(const float* in, int64_t count, float* out) {
  RETURN_IF_ERROR(CheckInner());
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("all_gather count = ", count));
  if (count == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Prepare());
  host_in_.resize(count);
  host_out_.resize(static_cast<size_t>(count) * size());
  RETURN_IF_ERROR(Copy(host_in_.data(), in, count * sizeof(float), cudaMemcpyDeviceToHost));
  RETURN_IF_ERROR(inner_->AllGather(host_in_.data(), count, host_out_.data()));
  return Copy(out, host_out_.data(), host_out_.size() * sizeof(float), cudaMemcpyHostToDevice);
}

absl::Status HostStagedCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  RETURN_IF_ERROR(CheckInner());
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("broadcast bytes = ", bytes));
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Prepare());
  std::vector<unsigned char> host(bytes);
  RETURN_IF_ERROR(Copy(host.data(), data, bytes, cudaMemcpyDeviceToHost));
  RETURN_IF_ERROR(inner_->Broadcast(host.data(), bytes, root));
  return Copy(data, host.data(), bytes, cudaMemcpyHostToDevice);
}

}  // namespace splitspec::net
