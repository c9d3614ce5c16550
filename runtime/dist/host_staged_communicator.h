// HostStagedCommunicator: a device-memory Communicator (buffer_space kDevice)
// over a host-memory one (Gloo), copying through the host: each collective
// copies the device buffer down, runs the inner collective on the host copy and
// copies the result back up. CUDA builds only (library splitspec_dist_cuda).
//
//   net::GlooCommunicator& gloo = ...;                    // the group's host communicator
//   HostStagedCommunicator staged(&gloo, /*device=*/0);
//   ASSIGN_OR_RETURN(auto model, Transformer::Load(path, &staged, {.device = cuda0}));
//
// Why: NCCL refuses two ranks on one GPU, so a tensor-parallel group of CUDA
// ranks sharing a device (tests, one-GPU machines) runs its collectives this
// way; it is also the fallback where NCCL is not built. Slower than NCCL (two
// PCIe copies per collective), same results as the inner communicator's (Gloo:
// rank-order sums, so batch invariance holds for any group size).
// Ordering: the caller completes the work that writes a buffer before the call
// (TransformerBackend::CompleteBuffers). The copies run on this communicator's own
// non-blocking stream and each is synchronized before the call goes on, so the
// result is in device memory when the call returns and any stream may consume it.
// (A plain cudaMemcpy up from pageable memory returns once the data is staged,
// before it reaches the device, and orders nothing with non-blocking streams: the
// device-rows store reading a gathered logit row on its own stream could race it.)
// The inner communicator must outlive this one; its BroadcastString stays a host
// operation (step plans go over the inner communicator directly).
// Thread safety: one thread at a time, as the inner communicator.
#ifndef SPLITSPEC_RUNTIME_DIST_HOST_STAGED_COMMUNICATOR_H_
#define SPLITSPEC_RUNTIME_DIST_HOST_STAGED_COMMUNICATOR_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/dist/communicator.h"

namespace splitspec::net {

class HostStagedCommunicator final : public Communicator {
 public:
  // REQUIRES inner->buffer_space() == kHost; device: the CUDA device of the buffers.
  HostStagedCommunicator(Communicator* inner, int device) : inner_(inner), device_(device) {}
  ~HostStagedCommunicator() override;
  HostStagedCommunicator(const HostStagedCommunicator&) = delete;
  HostStagedCommunicator& operator=(const HostStagedCommunicator&) = delete;

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Duration timeout() const override { return inner_->timeout(); }
  BufferSpace buffer_space() const override { return BufferSpace::kDevice; }
  const char* backend_name() const override { return "gloo (staged through the host)"; }

  // Buffers are device pointers on `device`. Errors: the inner communicator's,
  // or Internal naming the failed copy; FailedPrecondition if the inner
  // communicator is not a host one.
  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status AllGather(const float* in, int64_t count, float* out) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

 private:
  absl::Status CheckInner() const;
  // Selects the device and creates the copy stream on first use.
  absl::Status Prepare();
  // One copy on stream_, waited for before returning.
  absl::Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

  Communicator* inner_;
  int device_;
  cudaStream_t stream_ = nullptr;  // non-blocking; created by the first collective
  std::vector<float> host_in_, host_out_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_HOST_STAGED_COMMUNICATOR_H_
