#include "runtime/dist/tp_transport.h"

#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"
#include "runtime/dist/store_exchange.h"

namespace splitspec::net {
namespace {

bool IsCuda(const RankDevice& device) { return absl::StartsWith(device.device, "cuda:"); }

// "cuda:0 (GPU-1c2f... on host node-a)": how a refusal names a device.
std::string DeviceName(const RankDevice& device) {
  return absl::StrCat(device.device, " (", device.gpu_id.empty() ? "UUID unknown" : device.gpu_id,
                      " on host ", device.host, ")");
}

bool SameGpu(const RankDevice& a, const RankDevice& b) {
  if (a.host != b.host) return false;
  if (!a.gpu_id.empty() && !b.gpu_id.empty()) return a.gpu_id == b.gpu_id;
  return a.device == b.device;
}

// Why NCCL cannot join these ranks; nullopt when it can.
std::optional<std::string> NcclObstacle(absl::Span<const RankDevice> ranks) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!IsCuda(ranks[r])) {
      return absl::StrCat("rank ", r, " runs on ", ranks[r].device, ", NCCL needs a CUDA device");
    }
    if (!ranks[r].nccl_built) {
      return absl::StrCat("rank ", r, "'s binary was built without NCCL");
    }
  }
  for (size_t a = 0; a < ranks.size(); ++a) {
    for (size_t b = a + 1; b < ranks.size(); ++b) {
      if (SameGpu(ranks[a], ranks[b])) {
        return absl::StrCat("ranks ", a, " and ", b, " both run on GPU ", DeviceName(ranks[a]),
                            "; NCCL refuses two ranks on one device (give each rank its own "
                            "GPU, or use --tp-comm gloo)");
      }
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<TpComm> ParseTpComm(absl::string_view text) {
  if (text == "auto") return TpComm::kAuto;
  if (text == "nccl") return TpComm::kNccl;
  if (text == "gloo") return TpComm::kGloo;
  return absl::InvalidArgumentError(
      absl::StrCat("tp comm '", text, "' is not one of auto, nccl, gloo"));
}

const char* TpCommName(TpComm comm) {
  switch (comm) {
    case TpComm::kAuto:
      return "auto";
    case TpComm::kNccl:
      return "nccl";
    case TpComm::kGloo:
      return "gloo";
  }
  return "?";
}

std::string EncodeRankDevice(const RankDevice& device) {
  return absl::StrJoin(
      {device.host, device.device, device.gpu_id, std::string(TpCommName(device.requested)),
       std::string(device.nccl_built ? "nccl" : "no-nccl")},
      "\t");
}

absl::StatusOr<RankDevice> DecodeRankDevice(absl::string_view text) {
  const std::vector<std::string> fields = absl::StrSplit(text, '\t');
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank device report '", absl::CEscape(text), "': ", why));
  };
  if (fields.size() != 5) return bad(absl::StrCat(fields.size(), " fields, expected 5"));
  absl::StatusOr<TpComm> comm = ParseTpComm(fields[3]);
  if (!comm.ok()) return bad(comm.status().message());
  if (fields[4] != "nccl" && fields[4] != "no-nccl") return bad("last field not nccl|no-nccl");
  return RankDevice{.host = fields[0],
                    .device = fields[1],
                    .gpu_id = fields[2],
                    .requested = *comm,
                    .nccl_built = fields[4] == "nccl"};
}

absl::StatusOr<std::vector<RankDevice>> ExchangeRankDevices(RendezvousStore& store,
                                                            const CommunicatorOptions& options,
                                                            const RankDevice& mine) {
  ASSIGN_OR_RETURN(std::vector<std::string> reports,
                   GatherFromAll(store, options, "devices", EncodeRankDevice(mine)));
  std::vector<RankDevice> devices;
  devices.reserve(reports.size());
  for (size_t r = 0; r < reports.size(); ++r) {
    absl::StatusOr<RankDevice> device = DecodeRankDevice(reports[r]);
    if (!device.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp group '", options.group, "' rank ", r, ": ", device.status().message()));
    }
    devices.push_back(*std::move(device));
  }
  return devices;
}

absl::StatusOr<TpTransportChoice> ChooseTpTransport(absl::string_view group,
                                                    absl::Span<const RankDevice> ranks) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tp group '", group, "': no ranks"));
  }
  for (size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r].requested != ranks[0].requested) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp group '", group, "': rank 0 was started with --tp-comm ",
                       TpCommName(ranks[0].requested), ", rank ", r, " with --tp-comm ",
                       TpCommName(ranks[r].requested), " (every rank must name the same)"));
    }
  }
  const TpComm requested = ranks[0].requested;
  if (requested == TpComm::kGloo) return TpTransportChoice{TpTransport::kGloo, "--tp-comm gloo"};
  const std::optional<std::string> obstacle = NcclObstacle(ranks);
  if (!obstacle.has_value() && ranks.size() > kBatchInvariantNcclRanks) {
    if (requested == TpComm::kNccl) {
      return TpTransportChoice{
          TpTransport::kNccl,
          absl::StrCat("--tp-comm nccl with ", ranks.size(),
                       " ranks: NCCL's sum order may change with the batch, so logits are not "
                       "batch invariant and greedy speculation may differ from plain greedy")};
    }
    return TpTransportChoice{
        TpTransport::kGloo,
        absl::StrCat("not NCCL: with ", ranks.size(),
                     " ranks NCCL's sum order may change with the "
                     "batch (batch invariance needs <= ",
                     kBatchInvariantNcclRanks, "); --tp-comm nccl takes it anyway")};
  }
  if (!obstacle.has_value()) {
    return TpTransportChoice{TpTransport::kNccl, "every rank has a GPU of its own and NCCL"};
  }
  if (requested == TpComm::kAuto) {
    return TpTransportChoice{TpTransport::kGloo, absl::StrCat("not NCCL: ", *obstacle)};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tp group '", group, "': --tp-comm nccl refused: ", *obstacle));
}

}  // namespace splitspec::net
