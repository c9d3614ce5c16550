// LocalDrafts: a model-free drafter (lookup, ngram) run by the target leader
// itself, for the requests the coordinator gave no draft worker.
//
//   LocalDrafts local(drafter.get(), draft_options);
//   RETURN_IF_ERROR(local.Adopt(&assignment));   // before engine.AddRequest(assignment)
//   RETURN_IF_ERROR(engine.AddRequest(assignment));
//   loop:
//     local.Draft(engine);                        // blocks straight into the engine
//     engine.Step(now, &events);
//     local.TakeResults(engine, &events);         // results straight to the drafter
//
// Why: such a drafter needs no model and no device, and a draft worker process
// for it costs a ZeroMQ round trip per block and competes with the target for
// the same cores. Here a block costs a lookup between two steps of the target's
// own loop, on its thread.
//
// What stays the same: the drafter is a spec::Drafter driven by the draft
// worker's own engine (draft::DraftEngine: the same k choice, off windows and
// probes, whatever policy that engine runs), and its blocks go through
// TargetEngine::AddBlock and are verified like any other (greedy: token for
// token the target's greedy output; sampled: the target's distribution). The
// requests are marked with the draft worker id kDraftWorkerId, which the
// coordinator never assigns, so the engine waits for their blocks, keeps their
// p pending and reports their results as it does for a remote draft worker's;
// TakeResults hands those results to the drafter instead of a socket.
//
// Lookahead is 1 (sequential): drafting runs between the target's steps, so
// nothing overlaps a verification, and a block queued behind the one being
// verified would cost the bonus token the target takes on full acceptance.
//
// Thread model: the target leader's loop owns it, as it owns the engine.
#ifndef SPLITSPEC_TARGET_WORKER_LOCAL_DRAFTS_H_
#define SPLITSPEC_TARGET_WORKER_LOCAL_DRAFTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "draft_worker/draft_engine.h"
#include "proto/splitspec.pb.h"
#include "runtime/spec/drafter.h"
#include "target_worker/target_engine.h"

namespace splitspec::target {

class LocalDrafts {
 public:
  // The draft worker id of a request drafted here; coordinator ids count up from 1.
  static constexpr uint64_t kDraftWorkerId = ~uint64_t{0};
  // Its data-channel name (net::DraftPeerName(kDraftWorkerId)): the service
  // refuses frames from a remote peer calling itself that.
  static const std::string& PeerName();

  // `drafter` must outlive this. options.lookahead_blocks is set to 1 (see above).
  LocalDrafts(spec::Drafter* drafter, draft::DraftEngineOptions options);

  // Call with every Assignment before TargetEngine::AddRequest. A request with
  // no draft worker whose drafter is not "none" is drafted here: its
  // draft_worker_id becomes kDraftWorkerId and drafting (re)starts from its
  // committed tokens. Any other (a draft worker took it over, or plain decoding
  // asked for) is forgotten here and left unchanged. Errors: the draft engine's
  // (InvalidArgument naming the field; ResourceExhausted when full); the
  // request is then left as it came (it decodes without a draft).
  absl::Status Adopt(proto::Assignment* assignment);
  void Release(const std::string& request_id);

  // True if some request drafted here may send a block now.
  bool HasWork() const;
  // Drafts a block for every request with room and queues it in `engine`.
  // Errors: a failed Propose (the whole step; no block was queued).
  absl::Status Draft(TargetEngine& engine);
  // Gives the drafter every result in `events` meant for a request drafted
  // here, then leaves those events to the coordinator only (no socket send).
  // A result after a gap is answered from `engine` (TargetEngine::SyncResult).
  void TakeResults(const TargetEngine& engine, std::vector<TargetEvent>* events);

  int active_requests() const { return engine_.active_requests(); }
  const draft::DraftCounters& counters() const { return engine_.counters(); }

 private:
  draft::DraftEngine engine_;
};

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_LOCAL_DRAFTS_H_
