// Which transport a tensor-parallel group's device collectives use, chosen
// from what every rank reports about itself, identically on every rank.
//
//   RankDevice mine{.host = "node-a", .device = "cuda:0", .gpu_id = "GPU-1c2f...",
//                   .requested = TpComm::kAuto, .nccl_built = true};
//   ASSIGN_OR_RETURN(std::vector<RankDevice> ranks, ExchangeRankDevices(store, options, mine));
//   ASSIGN_OR_RETURN(TpTransportChoice choice, ChooseTpTransport(group, ranks));
//   if (choice.transport == TpTransport::kNccl) ...   // choice.reason: for the log
//
// The choice (`--tp-comm` of splitspec-target-worker, the same on every rank):
//   nccl: NCCL on device buffers. Refused at start-up (InvalidArgument) unless
//         every rank runs on a CUDA device, was built with NCCL, and has a GPU
//         of its own: two ranks on one GPU are refused naming both ranks and the
//         device (NCCL itself refuses two ranks on one device).
//   gloo: Gloo over TCP; a CUDA rank stages its device buffers through the host
//         (host_staged_communicator.h). Works for any placement, one GPU included.
//   auto: nccl where the conditions above hold and the group has at most
//         kBatchInvariantNcclRanks ranks, else gloo (the default). NCCL's sum of
//         two ranks is a + b whatever the size; with more, its ring/tree order
//         may change with the message size, which would break the batch
//         invariance greedy speculation relies on (nccl_communicator.h). Gloo
//         sums in rank order for any size. `nccl` takes NCCL anyway (logged).
// "One GPU" means the same host and the same GPU UUID (CUDA_VISIBLE_DEVICES may
// map different GPUs to the same ordinal, and the same GPU to different ones);
// a rank whose UUID is unknown is compared by its "cuda:N" name.
// Step plans (host messages) always go over the group's Gloo communicator.
#ifndef SPLITSPEC_RUNTIME_DIST_TP_TRANSPORT_H_
#define SPLITSPEC_RUNTIME_DIST_TP_TRANSPORT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/rendezvous_store.h"

namespace splitspec::net {

enum class TpComm { kAuto, kNccl, kGloo };

// The most ranks whose NCCL sum is bitwise independent of the message size.
inline constexpr size_t kBatchInvariantNcclRanks = 2;

// "auto", "nccl", "gloo"; InvalidArgument naming the value otherwise.
absl::StatusOr<TpComm> ParseTpComm(absl::string_view text);
const char* TpCommName(TpComm comm);

// What one rank reports about itself.
struct RankDevice {
  std::string host;    // this machine's host name
  std::string device;  // "cpu" or "cuda:N", as the rank was started
  std::string gpu_id;  // the CUDA device's UUID ("GPU-..."); "" on the CPU or when unknown
  TpComm requested = TpComm::kAuto;
  bool nccl_built = false;  // this binary has the NCCL communicator
};

// One line, tab-separated; Decode is its inverse. Decode: InvalidArgument
// naming the text if it is not such a line.
std::string EncodeRankDevice(const RankDevice& device);
absl::StatusOr<RankDevice> DecodeRankDevice(absl::string_view text);

// Publishes `mine` under "<options.group>/devices/rank-<rank>" and returns every
// rank's report in rank order. Errors: GatherFromAll's (store_exchange.h), or
// Decode's naming the rank.
absl::StatusOr<std::vector<RankDevice>> ExchangeRankDevices(RendezvousStore& store,
                                                            const CommunicatorOptions& options,
                                                            const RankDevice& mine);

enum class TpTransport {
  kGloo,  // host collectives; CUDA ranks stage through the host
  kNccl,  // device collectives over NCCL
};

struct TpTransportChoice {
  TpTransport transport = TpTransport::kGloo;
  std::string reason;  // why, for the log ("not NCCL: ranks 0 and 1 both run on GPU ...")
};

// The group's transport from every rank's report (ranks[r] is rank r's), by
// the rules above; a pure function, so every rank reaches the same answer.
// Errors (InvalidArgument, naming group `group`): ranks requesting different
// --tp-comm (naming two of them); --tp-comm nccl where a rank is on the CPU or
// has no NCCL (naming it), or two ranks share a GPU (naming both and the device).
absl::StatusOr<TpTransportChoice> ChooseTpTransport(absl::string_view group,
                                                    absl::Span<const RankDevice> ranks);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_TP_TRANSPORT_H_
