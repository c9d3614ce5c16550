// GlooCommunicator: a Communicator over Gloo's TCP transport, for CPU
// tensor-parallel groups (buffers in host memory).
//
//   ASSIGN_OR_RETURN(auto store, FileRendezvousStore::Open(dir));        // one host
//   // or: ConnectRendezvousStore(leader_endpoint, "g/rank-1")           // any hosts
//   ASSIGN_OR_RETURN(auto comm, GlooCommunicator::Create(
//       *store, {.group = "g", .rank = 1, .size = 2, .timeout = absl::Seconds(10)},
//       {.hostname = "127.0.0.1"}));
//
// Rendezvous: each rank opens a TCP listener, publishes its address under
// "<group>/gloo/..." in the store, reads everybody else's and connects the full
// mesh (Gloo's rendezvous::Context). Create returns once every pair is connected.
//
// AllGather is one Gloo broadcast per rank in rank order (for the small
// vectors of tensor-parallel decode, far cheaper on loopback than Gloo's ring
// allgather: see gloo_communicator.cc). AllReduceSum sums in rank order: each
// rank gathers every rank's vector and adds them as ((r0 + r1) + r2) + ..., so element i's result
// depends only on the ranks' values of element i, never on `count` or on how Gloo segments the
// buffer. This keeps the model forward batch-invariant (docs/architecture.md: a position's
// logits do not depend on the batch) for any group size, at the cost of moving
// (size - 1) * count floats per rank instead of a ring's 2 (size - 1) / size * count:
// the same for size 2, and tensor-parallel decode vectors are small.
//
// Gloo reports errors by throwing gloo::Exception (and gloo::EnforceNotMet from
// its internal checks); every one is caught in gloo_communicator.cc and
// converted (see communicator.h for the failure contract).
//
// Process-wide effect: Create sets SIGPIPE to ignored if it is at its default
// action, because Gloo writes to sockets with writev(2) and a dead peer would
// otherwise kill this process instead of failing the collective.
//
// The store must stay reachable until every rank's Create has returned (the
// leader keeps its RendezvousServer running for the life of the group).
#ifndef SPLITSPEC_RUNTIME_DIST_GLOO_COMMUNICATOR_H_
#define SPLITSPEC_RUNTIME_DIST_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/rendezvous_store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace splitspec::net {

struct GlooTransportOptions {
  // Address this rank listens on and publishes to the others. Empty (default):
  // the address the machine's host name resolves to; tests use "127.0.0.1".
  std::string hostname;
  // Network interface to listen on instead of `hostname` (e.g. "eth0"); empty by default.
  std::string iface;
  // Bound on joining the group (every rank publishing its address and connecting);
  // zero (default): CommunicatorOptions.timeout. Ranks that start apart (other hosts,
  // a loaded machine) may need longer to meet than one collective should take.
  absl::Duration rendezvous_timeout = absl::ZeroDuration();
};

class GlooCommunicator final : public Communicator {
 public:
  // Joins the group: validates `options`, opens the listener, rendezvous through
  // `store` (used only during this call) and connects to every other rank.
  // Errors: InvalidArgument (options, naming the field); DeadlineExceeded naming
  // the group if the other ranks did not all appear within the rendezvous timeout
  // (transport.rendezvous_timeout, else options.timeout);
  // Unavailable for transport failures (address unresolvable, connection refused).
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(
      RendezvousStore& store, const CommunicatorOptions& options,
      const GlooTransportOptions& transport = {});
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Duration timeout() const override { return timeout_; }
  BufferSpace buffer_space() const override { return BufferSpace::kHost; }
  const char* backend_name() const override { return "gloo"; }

  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status AllGather(const float* in, int64_t count, float* out) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

 private:
  GlooCommunicator(std::shared_ptr<gloo::Context> context, const CommunicatorOptions& options);

  // OK, or FailedPrecondition repeating the failure that broke the group.
  absl::Status CheckUsable() const;
  // Records and returns the status of a failed collective.
  absl::Status Fail(absl::Status status);
  // Gloo's tag for the next collective: ranks agree because calls are ordered.
  uint32_t NextTag() { return next_tag_++; }

  std::shared_ptr<gloo::Context> context_;
  std::string group_;
  int rank_;
  int size_;
  absl::Duration timeout_;
  uint32_t next_tag_ = 1;
  absl::Status broken_;                // first failure; OK while usable
  std::vector<float> gather_scratch_;  // [size * count] of the last AllReduceSum
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_GLOO_COMMUNICATOR_H_
