// NcclCommunicator: a Communicator over NCCL, for GPU tensor-parallel groups
// (buffers in the memory of this rank's CUDA device). Built only with CUDA
// (library splitspec_nccl, linked when SPLITSPEC_WITH_CUDA).
//
//   ASSIGN_OR_RETURN(auto store, ConnectRendezvousStore(leader_endpoint, "g/rank-1/nccl"));
//   ASSIGN_OR_RETURN(auto comm, NcclCommunicator::Create(
//       *store, {.group = "g", .rank = 1, .size = 2}, {.device = 1}));
//   RETURN_IF_ERROR(comm->AllReduceSum(device_partial, 576));   // device pointer
//
// Rendezvous: rank 0 creates the ncclUniqueId and publishes it under
// "<group>/nccl/unique-id" in the store; the other ranks read it (waiting up to
// the timeout), then every rank joins with ncclCommInitRankConfig.
//
// Timeouts: the communicator is non-blocking (ncclConfig_t.blocking = 0). Init
// and every collective are polled (ncclCommGetAsyncError, cudaStreamQuery) until
// they finish or the timeout passes; then the communicator is aborted
// (ncclCommAbort), so a dead rank fails the group with DeadlineExceeded instead
// of hanging the GPU stream forever.
//
// Collectives are synchronous: each one is enqueued on the communicator's own
// stream and waited for, so buffers may be reused on return. AllReduceSum uses
// NCCL's sum (ring or tree, NCCL's choice by size): every rank gets the same
// result; with 2 ranks it is a + b (bitwise order-free), with more ranks the
// order may depend on the size, so batch invariance holds only for size <= 2.
// Host-side messages (step plans) go over a companion GlooCommunicator;
// BroadcastString refuses device communicators.
//
// Thread safety: one thread at a time; the thread's current CUDA device is set
// to options.device on each call.
#ifndef SPLITSPEC_RUNTIME_DIST_NCCL_COMMUNICATOR_H_
#define SPLITSPEC_RUNTIME_DIST_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/rendezvous_store.h"

namespace splitspec::net {

struct NcclDeviceOptions {
  int device = 0;  // CUDA device of this rank; in [0, cudaGetDeviceCount())
};

class NcclCommunicator final : public Communicator {
 public:
  // Errors: InvalidArgument (options, or a device out of range, naming it);
  // FailedPrecondition if no CUDA device can be used; DeadlineExceeded naming the
  // group if the unique id or the other ranks did not appear within the timeout;
  // Internal / Unavailable from CUDA or NCCL (statement, file and line).
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      RendezvousStore& store, const CommunicatorOptions& options,
      const NcclDeviceOptions& device = {});
  // Destroys the communicator (aborts it if broken) and the stream.
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Duration timeout() const override { return timeout_; }
  BufferSpace buffer_space() const override { return BufferSpace::kDevice; }
  const char* backend_name() const override { return "nccl"; }

  // Buffers are device pointers on options.device.
  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status AllGather(const float* in, int64_t count, float* out) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

 private:
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int device,
                   const CommunicatorOptions& options);

  absl::Status CheckUsable() const;
  // Waits for the collective just enqueued; on timeout or error aborts the
  // communicator and returns the failure, naming `what`.
  absl::Status Finish(absl::Status enqueued, const std::string& what);

  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  std::string group_;
  int rank_;
  int size_;
  absl::Duration timeout_;
  absl::Status broken_;  // first failure; OK while usable
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_NCCL_COMMUNICATOR_H_
