// Communicator: the collectives a tensor-parallel group runs, whatever the
// transport. GlooCommunicator (host memory, TCP; CPU target groups) and
// NcclCommunicator (device memory; GPU target groups) implement it.
//
//   // every rank of group "g", e.g. two processes:
//   ASSIGN_OR_RETURN(auto store, ConnectRendezvousStore(leader_endpoint, "g/rank-1"));
//   ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(*store, {.group = "g", .rank = 1,
//                                                                 .size = 2}));
//   std::vector<float> partial(576);                       // [n_embd]
//   RETURN_IF_ERROR(comm->AllReduceSum(partial.data(), partial.size()));
//   RETURN_IF_ERROR(BroadcastString(*comm, &plan, /*root=*/0));  // the leader's step plan
//
// Ordering: collectives are matched by call order. Every rank must issue the
// same sequence of collectives with the same sizes (and roots); a rank that
// skips one, or calls with a different size, makes the group fail or time out.
//
// Failure: every collective waits at most timeout(). A rank that never joins,
// died, or lost its connection makes the others fail with DeadlineExceeded
// (nobody answered in time) or Unavailable (a peer closed its connection); the
// message names the collective, its size, this rank and the timeout. The
// group does not hang. After any failure the communicator is broken: every
// later call returns FailedPrecondition repeating the first failure, and the
// contents of the buffers of the failed call are unspecified. Recovery is a
// new group (a new rendezvous), which is the coordinator's job.
//
// Thread safety: one thread at a time per communicator (calls are ordered).
#ifndef SPLITSPEC_RUNTIME_DIST_COMMUNICATOR_H_
#define SPLITSPEC_RUNTIME_DIST_COMMUNICATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace splitspec::net {

// Where collective buffers must live.
enum class BufferSpace {
  kHost,    // ordinary CPU memory (Gloo)
  kDevice,  // memory of the communicator's CUDA device (NCCL)
};

// What every backend needs to join a group.
struct CommunicatorOptions {
  // Name of the group; every rendezvous key is prefixed with it, so one store can
  // serve many groups. Non-empty; no default.
  std::string group;
  int rank = 0;  // in [0, size)
  int size = 1;  // ranks in the group, >= 1
  // Bound on each collective and on the rendezvous (waiting for all ranks to
  // publish their addresses). Default 30 s.
  absl::Duration timeout = absl::Seconds(30);
};

// InvalidArgument naming the field at fault (empty group, size < 1, rank out of
// range, timeout not positive).
absl::Status ValidateCommunicatorOptions(const CommunicatorOptions& options);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual absl::Duration timeout() const = 0;
  virtual BufferSpace buffer_space() const = 0;
  // "gloo" or "nccl", for messages and benchmarks.
  virtual const char* backend_name() const = 0;

  // data [count]: on return, on every rank, data[i] = sum over ranks of their
  // data[i]. Every rank gets bitwise the same result. Backends state their
  // summation order (GlooCommunicator: rank order, whatever `count`).
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;

  // in [count] -> out [size * count]: out[r * count + i] = rank r's in[i]. `in`
  // and `out` must not overlap.
  virtual absl::Status AllGather(const float* in, int64_t count, float* out) = 0;

  // data [bytes]: root's bytes are copied to every rank. REQUIRES: 0 <= root < size.
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;

  // data [count] floats; Broadcast of count * 4 bytes.
  absl::Status BroadcastFloats(float* data, int64_t count, int root) {
    return Broadcast(data, count * static_cast<int64_t>(sizeof(float)), root);
  }
};

// Broadcasts a message whose length only `root` knows (a leader's step plan):
// first its length, then its bytes, so two collectives. On return every rank's
// *message equals root's. REQUIRES: comm.buffer_space() == kHost (FailedPrecondition
// otherwise: device groups send host messages over a companion Gloo group).
absl::Status BroadcastString(Communicator& comm, std::string* message, int root);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_COMMUNICATOR_H_
