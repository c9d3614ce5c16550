#include "runtime/dist/nccl_communicator.h"

#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/base/status_macros.h"
#include "runtime/dist/nccl_check.h"
#include "runtime/dist/store_exchange.h"

namespace splitspec::net {
namespace {

// Polling backs off from spinning to short sleeps: collectives of a decode step
// take microseconds, a dead peer is noticed within the timeout.
void PollPause(int iteration) {
  if (iteration < 1000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Waits until the non-blocking communicator has no operation in progress.
absl::Status WaitCommReady(ncclComm_t comm, absl::Time deadline, const std::string& what) {
  for (int i = 0;; ++i) {
    ncclResult_t state = ncclSuccess;
    NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      absl::Status s = NcclStatus(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
      return absl::Status(s.code(),
                          absl::StrCat(what, ": ", s.message(), ": ", ncclGetLastError(comm)));
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError(what);
    PollPause(i);
  }
}

// Waits until every operation on `stream` has finished, watching `comm` for
// asynchronous errors meanwhile.
absl::Status WaitStream(ncclComm_t comm, cudaStream_t stream, absl::Time deadline,
                        const std::string& what) {
  for (int i = 0;; ++i) {
    const cudaError_t query = cudaStreamQuery(stream);
    if (query == cudaSuccess) return absl::OkStatus();
    if (query != cudaErrorNotReady) {
      CUDA_RETURN_IF_ERROR(query);
    }
    ncclResult_t state = ncclSuccess;
    NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &state));
    if (state != ncclSuccess && state != ncclInProgress) {
      absl::Status s = NcclStatus(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
      return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError(what);
    PollPause(i);
  }
}

// Rank 0 makes the id; the others read it through the store (store_exchange.h).
absl::StatusOr<ncclUniqueId> ShareUniqueId(RendezvousStore& store,
                                           const CommunicatorOptions& options) {
  ncclUniqueId id;
  ASSIGN_OR_RETURN(std::string bytes,
                   ShareFromRoot(store, options, "nccl/unique-id", sizeof(id.internal),
                                 [&]() -> absl::StatusOr<std::string> {
                                   NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
                                   return std::string(id.internal, sizeof(id.internal));
                                 }));
  std::memcpy(id.internal, bytes.data(), bytes.size());
  return id;
}

absl::Status CheckDevice(int device) {
  int count = 0;
  kernels::IgnoreCudaError(cudaGetDeviceCount(&count));  // no driver reads as no device
  if (count == 0) {
    return absl::FailedPreconditionError("NCCL communicator: no usable CUDA device");
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL device = ", device, " outside [0, ", count, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

NcclCommunicator::NcclCommunicator(ncclComm_t comm, cudaStream_t stream, int device,
                                   const CommunicatorOptions& options)
    : comm_(comm),
      stream_(stream),
      device_(device),
      group_(options.group),
      rank_(options.rank),
      size_(options.size),
      timeout_(options.timeout) {}

NcclCommunicator::~NcclCommunicator() {
  kernels::IgnoreCudaError(cudaSetDevice(device_));
  if (broken_.ok()) {
    ncclCommFinalize(comm_);
    WaitCommReady(comm_, absl::Now() + timeout_, "ncclCommFinalize").IgnoreError();
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
  kernels::IgnoreCudaError(cudaStreamDestroy(stream_));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    RendezvousStore& store, const CommunicatorOptions& options, const NcclDeviceOptions& device) {
  RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  RETURN_IF_ERROR(CheckDevice(device.device));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device.device));
  ASSIGN_OR_RETURN(ncclUniqueId id, ShareUniqueId(store, options));
  cudaStream_t stream = nullptr;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  absl::Status s =
      NcclStatus(ncclCommInitRankConfig(&comm, options.size, id, options.rank, &config),
                 "ncclCommInitRankConfig", __FILE__, __LINE__);
  if (s.ok()) {
    s = WaitCommReady(
        comm, absl::Now() + options.timeout,
        absl::StrCat("NCCL init of group '", options.group, "' (rank ", options.rank, " of ",
                     options.size, ") not done within ", absl::FormatDuration(options.timeout)));
  }
  if (!s.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    kernels::IgnoreCudaError(cudaStreamDestroy(stream));
    return s;
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(comm, stream, device.device, options));
}

absl::Status NcclCommunicator::CheckUsable() const {
  if (broken_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "communicator of group '", group_, "' is broken by an earlier failure: ", broken_.message()));
}

absl::Status NcclCommunicator::Finish(absl::Status enqueued, const std::string& what) {
  const std::string described =
      absl::StrCat(what, " (group '", group_, "', rank ", rank_, " of ", size_, ", timeout ",
                   absl::FormatDuration(timeout_), ")");
  const absl::Time deadline = absl::Now() + timeout_;
  absl::Status s = enqueued;
  if (s.ok()) s = WaitCommReady(comm_, deadline, absl::StrCat(described, " not enqueued in time"));
  if (s.ok()) s = WaitStream(comm_, stream_, deadline, absl::StrCat(described, " timed out"));
  if (s.ok()) return s;
  broken_ = absl::Status(s.code(), absl::StrCat(described, ": ", s.message()));
  ncclCommAbort(comm_);  // unblocks the stream; the communicator cannot be used again
  return broken_;
}

absl::Status NcclCommunicator::AllReduceSum(float* data, int64_t count) {
  RETURN_IF_ERROR(CheckUsable());
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("all_reduce count = ", count));
  if (count == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return Finish(NcclStatus(ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream_),
                           "ncclAllReduce", __FILE__, __LINE__),
                absl::StrCat("all_reduce_sum of ", count, " floats"));
}

absl::Status NcclCommunicator::AllGather(const float* in, int64_t count, float* out) {
  RETURN_IF_ERROR(CheckUsable());
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("all_gather count = ", count));
  if (count == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return Finish(NcclStatus(ncclAllGather(in, out, count, ncclFloat, comm_, stream_),
                           "ncclAllGather", __FILE__, __LINE__),
                absl::StrCat("all_gather of ", count, " floats"));
}

absl::Status NcclCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  RETURN_IF_ERROR(CheckUsable());
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root = ", root, " outside [0, ", size_, ")"));
  }
  if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("broadcast bytes = ", bytes));
  if (bytes == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  return Finish(NcclStatus(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream_),
                           "ncclBroadcast", __FILE__, __LINE__),
                absl::StrCat("broadcast of ", bytes, " bytes from rank ", root));
}

}  // namespace splitspec::net
