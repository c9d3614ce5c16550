#include "target_worker/local_drafts.h"

#include <utility>

#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/worker_identity.h"

namespace splitspec::target {
namespace {

draft::DraftEngineOptions Sequential(draft::DraftEngineOptions options) {
  options.lookahead_blocks = 1;
  return options;
}

}  // namespace

const std::string& LocalDrafts::PeerName() {
  static const std::string* const name = new std::string(net::DraftPeerName(kDraftWorkerId));
  return *name;
}

LocalDrafts::LocalDrafts(spec::Drafter* drafter, draft::DraftEngineOptions options)
    : engine_(drafter, Sequential(std::move(options))) {}

absl::Status LocalDrafts::Adopt(proto::Assignment* assignment) {
  const bool here = assignment->draft_worker_id() == 0 && assignment->drafter() != "none";
  if (!here) {
    engine_.Release(assignment->request_id());
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(engine_.AddRequest(*assignment));
  assignment->set_draft_worker_id(kDraftWorkerId);
  assignment->clear_draft_worker_key();
  return absl::OkStatus();
}

void LocalDrafts::Release(const std::string& request_id) { engine_.Release(request_id); }

bool LocalDrafts::HasWork() const { return engine_.HasWork(); }

absl::Status LocalDrafts::Draft(TargetEngine& engine) {
  if (!engine_.HasWork()) return absl::OkStatus();
  std::vector<draft::OutgoingBlock> blocks;
  RETURN_IF_ERROR(engine_.Step(&blocks));
  for (const draft::OutgoingBlock& out : blocks) engine.AddBlock(out.block, PeerName());
  return absl::OkStatus();
}

void LocalDrafts::TakeResults(const TargetEngine& engine, std::vector<TargetEvent>* events) {
  std::vector<TargetEvent> kept;
  kept.reserve(events->size());
  for (TargetEvent& event : *events) {
    if (event.draft_peer != PeerName()) {
      kept.push_back(std::move(event));
      continue;
    }
    if (engine_.OnResult(event.result) == draft::ResultAction::kNeedSync) {
      // In one process no result is lost; a gap means a bug, so resync and say so.
      SPLITSPEC_LOG(WARNING) << "local drafter missed a result of request "
                             << event.result.request_id() << "; resyncing";
      absl::StatusOr<proto::VerifyResult> sync = engine.SyncResult(event.result.request_id());
      if (sync.ok()) (void)engine_.OnResult(*sync);
    }
    if (!event.to_coordinator) continue;
    event.draft_peer.clear();
    kept.push_back(std::move(event));
  }
  *events = std::move(kept);
}

}  // namespace splitspec::target
