#pragma once

// TargetEngine::WorkItem, shared by the engine's translation units
// (target_engine.cc: planning and the forward; target_engine_verify.cc:
// verification and resolution). Private to target_worker.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/spec/verify.h"
#include "target_worker/target_engine.h"

namespace splitspec::target {

// One request's share of a step: what Plan chose, then what the forward and
// the verification made of it.
struct TargetEngine::WorkItem {
  enum class Decision {
    kNone,         // nothing to decide this step (a prompt chunk, or p kept pending)
    kVerifyBlock,  // verify `block` from p at the frontier and the block's rows
    kOwnToken,     // no block: the target chooses the frontier's token itself
  };

  TargetRequest* request = nullptr;
  // --- Plan ---
  std::vector<int32_t> tokens;  // fed this step at positions fed_from ...; empty: no forward
  int fed_from = 0;             // the cache's length when planned
  model::LogitsMode logits = model::LogitsMode::kNone;
  const proto::DraftBlock* block = nullptr;  // verified this step, if any
  bool prefill = false;                      // tokens are a prompt chunk
  bool feeds_unfed = false;                  // tokens[0] is the last committed token
  // A tree block (BranchesTree): the forward's parents (root = tokens[0], the last
  // committed token; spec::TreeForwardParents), and whether the root was in the
  // cache already (p pending) and is fed again (the cache drops it first).
  std::vector<int32_t> tree_parents;
  bool refeeds_root = false;
  int batch_index = -1;                      // index in the forward's batch, -1 if not fed
  // Guided requests: what the unconditional companion is fed in the same forward.
  std::vector<int32_t> companion_tokens;
  int companion_batch_index = -1;
  // --- after the forward ---
  Decision decision = Decision::kNone;
  std::vector<TargetRow> rows;  // p for positions frontier, frontier + 1, ...
  // --- verification ---
  std::vector<float> target_probs;   // host: rows, flattened [k + 1, vocab]
  std::vector<int32_t> target_tokens;  // host, every row a greedy token: those [k + 1]
  std::vector<int64_t> device_rows;  // device: the rows' DeviceRows indices [k + 1]
  std::vector<int32_t> draft_tokens;
  std::vector<spec::SparseDistribution> draft_q;
  spec::VerifyRequest verify;
  absl::StatusOr<spec::VerifyOutcome> outcome = absl::UnknownError("not verified");
  // A tree block's accepted path (spec::TreeVerifyOutcome::accepted_nodes), after
  // which `rows` are those along it (row j: p at frontier + j).
  std::vector<int32_t> accepted_nodes;
};

}  // namespace splitspec::target
