// TargetEngine's verification and resolution: the step's rows judged against
// its blocks, the outcomes committed and reported (planning and the forward are
// in target_engine.cc).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/trace.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/spec_policy.h"
#include "runtime/spec/token_logprobs.h"
#include "runtime/spec/tree_verify.h"
#include "runtime/spec/verify.h"
#include "target_worker/target_engine.h"
#include "target_worker/target_engine_work_item.h"

namespace splitspec::target {

void TargetEngine::Verify(std::vector<WorkItem>& items, absl::Time now) {
  // Two batches at most: the requests whose p is on the host, and those whose p
  // is on the device. Each choice is a function of (p, seed, position) alone, so
  // the split changes nothing that is committed.
  std::vector<spec::VerifyRequest> host_batch;
  std::vector<WorkItem*> on_host, on_device;
  for (WorkItem& item : items) {
    if (!Decide(item, now)) continue;
    if (!item.tree_parents.empty()) {
      VerifyTreeItem(item);
      continue;
    }
    if (!item.target_tokens.empty()) {  // greedy tokens: the rule needs no rows
      item.outcome = spec::VerifyGreedyTokens(item.target_tokens, item.draft_tokens,
                                              item.verify.start_position, item.verify.want_bonus,
                                              model_->config().vocab_size);
      continue;
    }
    if (VerifiesOnDevice(*item.request)) {
      on_device.push_back(&item);
    } else {
      host_batch.push_back(item.verify);
      on_host.push_back(&item);
    }
  }
  auto apply = [](const std::vector<WorkItem*>& deciding,
                  absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> outcomes) {
    for (size_t j = 0; j < deciding.size(); ++j) {
      deciding[j]->outcome = outcomes.ok() ? std::move((*outcomes)[j]) : outcomes.status();
    }
  };
  if (!on_host.empty()) apply(on_host, spec::VerifyBatch(host_batch, model_->config().vocab_size));
  if (!on_device.empty()) apply(on_device, VerifyOnDevice(on_device));
}

void TargetEngine::VerifyTreeItem(WorkItem& item) {
  const proto::DraftBlock& block = *item.block;
  spec::TreeVerifyRequest tree;
  tree.mode = item.verify.mode;
  tree.target_probs = item.target_probs;
  tree.draft_tokens = item.draft_tokens;
  tree.parents = block.parents();
  tree.draft_q = item.draft_q;
  tree.seed = item.verify.seed;
  tree.start_position = item.verify.start_position;
  tree.want_bonus = true;
  absl::StatusOr<spec::TreeVerifyOutcome> outcome =
      spec::VerifyTree(tree, model_->config().vocab_size);
  if (!outcome.ok()) {
    item.outcome = outcome.status();
    return;
  }
  // The draft drafts its next block past a tree along the tree's first path (nodes
  // 0, 1, ... each the child of the one before; draft_worker/draft_engine.h), so a
  // block queued right after that path continues it only when the accepted path is
  // the whole first path: then, as after a chain accepted in full, the bonus is not
  // taken and that block verifies its position (the same rule at the same position:
  // exact as a chain's pipeline is). Any other path takes the bonus (or ended in a
  // correction) and the queued blocks are stale.
  int first_path = 0;
  while (first_path < block.parents_size() && block.parents(first_path) == first_path - 1)
    ++first_path;
  bool whole_first_path = !outcome->rejected &&
                          static_cast<int>(outcome->accepted_nodes.size()) == first_path;
  for (int j = 0; whole_first_path && j < first_path; ++j)
    whole_first_path = outcome->accepted_nodes[j] == j;
  item.verify.want_bonus =
      !(whole_first_path && item.request->HasBlockAt(item.request->frontier() + first_path));
  if (!item.verify.want_bonus) outcome->committed.pop_back();  // the first path's leaf's bonus
  item.accepted_nodes = outcome->accepted_nodes;
  item.outcome = spec::VerifyOutcome{static_cast<int>(outcome->accepted_nodes.size()),
                                     std::move(outcome->committed), outcome->rejected};
  // Row j of the committed tokens is p after the path's first j nodes.
  std::vector<TargetRow> path_rows;
  path_rows.push_back(std::move(item.rows[0]));
  for (int32_t node : item.accepted_nodes) path_rows.push_back(std::move(item.rows[node + 1]));
  item.rows = std::move(path_rows);
}

absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> TargetEngine::VerifyOnDevice(
    const std::vector<WorkItem*>& deciding) {
  std::vector<spec::DeviceVerifyRequest> requests;
  requests.reserve(deciding.size());
  for (const WorkItem* item : deciding) {
    spec::DeviceVerifyRequest r;
    r.mode = item->verify.mode;
    r.params = item->request->params();
    r.logit_rows = item->device_rows;
    r.draft_tokens = item->draft_tokens;
    r.draft_q = item->draft_q;
    r.start_position = item->verify.start_position;
    r.want_bonus = item->verify.want_bonus;
    requests.push_back(r);
  }
  return device_rows_->Verify(requests);
}

bool TargetEngine::Decide(WorkItem& item, absl::Time now) {
  TargetRequest& request = *item.request;
  if (request.finished()) return false;                 // the forward or its rows failed
  if (item.prefill && item.rows.empty()) return false;  // not the prompt's last chunk
  // rows[0] must be p at the frontier: from this forward (prefill, unfed) or pending.
  if (!item.prefill && !item.feeds_unfed) {
    item.rows.insert(item.rows.begin(), request.pending());
  }
  if (item.block != nullptr) {
    item.decision = WorkItem::Decision::kVerifyBlock;
  } else if (request.ReadyBlock() == nullptr && DecidesAlone(request, now)) {
    // (A ready block not fed yet, after a prompt's last chunk, is verified next step.)
    item.decision = WorkItem::Decision::kOwnToken;
  } else {
    return false;  // Resolve keeps p pending until a block comes
  }
  FillVerifyRequest(item);
  return true;
}

void TargetEngine::FillVerifyRequest(WorkItem& item) const {
  const TargetRequest& request = *item.request;
  const int k = item.block == nullptr ? 0 : item.block->tokens_size();
  const bool on_device = VerifiesOnDevice(request);
  // Greedy tokens (ReadRows) verify as tokens; a tree, or rows of both kinds, as rows
  // (a greedy token is its one-hot row).
  const bool tokens_only =
      !on_device && item.tree_parents.empty() &&
      std::all_of(item.rows.begin(), item.rows.begin() + k + 1,
                  [](const TargetRow& row) { return row.greedy_token >= 0; });
  const size_t vocab = static_cast<size_t>(model_->config().vocab_size);
  // One allocation for the k + 1 rows (each is vocab floats: growing by doubling
  // would copy and fault in a megabyte's pages several times a step).
  if (!on_device && !tokens_only) item.target_probs.reserve(static_cast<size_t>(k + 1) * vocab);
  for (int i = 0; i <= k; ++i) {
    const TargetRow& row = item.rows[i];
    if (on_device) {
      item.device_rows.push_back(row.device_row);
    } else if (tokens_only) {
      item.target_tokens.push_back(row.greedy_token);
    } else if (row.greedy_token >= 0) {
      item.target_probs.resize(item.target_probs.size() + vocab, 0.0f);
      item.target_probs[item.target_probs.size() - vocab + row.greedy_token] = 1.0f;
    } else {
      item.target_probs.insert(item.target_probs.end(), row.probs.begin(), row.probs.end());
    }
  }
  spec::VerifyRequest& verify = item.verify;
  verify.mode = request.mode();
  verify.seed = request.params().seed;
  verify.start_position = request.frontier();
  // No bonus when the next block is already queued: it verifies that position
  // (an empty block is that position's only block, so it always takes the bonus).
  verify.want_bonus = k == 0 || !request.HasBlockAt(request.frontier() + k);
  if (item.block != nullptr) {
    item.draft_tokens.assign(item.block->tokens().begin(), item.block->tokens().end());
    if (request.mode() == spec::VerifyMode::kRejection) {
      for (const proto::SparseDistribution& wire : item.block->q()) {
        item.draft_q.push_back({{wire.token_ids().begin(), wire.token_ids().end()},
                                {wire.probs().begin(), wire.probs().end()}});
      }
    }
  }
  verify.target_probs = item.target_probs;
  verify.draft_tokens = item.draft_tokens;
  verify.draft_q_sparse = item.draft_q;
}

void TargetEngine::Resolve(std::vector<WorkItem>& items, absl::Time now,
                           std::vector<TargetEvent>* events) {
  for (WorkItem& item : items) {
    TargetRequest& request = *item.request;
    if (request.finished()) continue;
    switch (item.decision) {
      case WorkItem::Decision::kNone:
        // p at the frontier, newly computed, waits for the draft's block.
        if (!item.rows.empty()) request.SetPending(KeepRow(request, std::move(item.rows[0])));
        break;
      case WorkItem::Decision::kOwnToken:
        ResolveOwnToken(item, now, events);
        break;
      case WorkItem::Decision::kVerifyBlock:
        ResolveBlock(item, now, events);
        break;
    }
  }
}

void TargetEngine::ResolveBlock(WorkItem& item, absl::Time now, std::vector<TargetEvent>* events) {
  TargetRequest& request = *item.request;
  const proto::DraftBlock& block = *item.block;
  if (!item.outcome.ok()) {
    // A block that cannot be verified (e.g. q(x) = 0 for a drafted token) is
    // dropped; the cache goes back to holding exactly the committed tokens.
    ++counters_.malformed_blocks;
    SPLITSPEC_LOG(WARNING) << "request " << request.id() << ": dropped block at " << block.start()
                           << ": " << item.outcome.status();
    request.TruncateCaches(request.frontier());
    request.SetPending(KeepRow(request, std::move(item.rows[0])));
    request.DropBlocks();
    return;
  }
  const int k = block.tokens_size();
  if (k == 0 && block.alone_tokens() > 1) {
    const int64_t end = int64_t{block.start()} + block.alone_tokens();
    request.DecideAloneUntil(static_cast<int>(std::min<int64_t>(end, int64_t{1} << 30)),
                             static_cast<int>(std::min<uint32_t>(block.window_result_tokens(),
                                                                 block.alone_tokens())));
  } else if (k > 0) {
    request.EndAloneWindow();
  }
  if (!item.tree_parents.empty()) {
    // The cache keeps the root and the accepted path (forward nodes 1 + node).
    std::vector<int32_t> path = {0};
    for (int32_t node : item.accepted_nodes) path.push_back(node + 1);
    if (absl::Status kept = request.cache().KeepPath(item.fed_from, path); !kept.ok()) {
      SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << kept;
      request.Finish(proto::FINISH_REASON_ERROR);
      Report(request, request.FullSequenceResult(), events);
      return;
    }
  }
  std::vector<spec::TokenLogprob> logprobs = CommittedLogprobs(item);
  // Every draft accepted and no bonus (a chain in full, or a tree's whole first path,
  // with the next block queued): p after them is row `accepted` (a tree's rows are its
  // path's, VerifyTreeItem).
  std::optional<TargetRow> pending_next;
  const int accepted = item.outcome->accepted;
  if (!item.verify.want_bonus && static_cast<int>(item.outcome->committed.size()) == accepted &&
      accepted > 0) {
    pending_next = KeepRow(request, std::move(item.rows[accepted]));
  }
  const bool tree_block = block.parents_size() > 0;  // (ApplyOutcome drops `block`)
  proto::VerifyResult result = request.ApplyOutcome(&block, *item.outcome, std::move(pending_next),
                                                    now, std::move(logprobs));
  if (tree_block && item.tree_parents.empty()) {  // verified as a chain: its first nodes
    for (int j = 0; j < item.outcome->accepted; ++j) result.add_accepted_nodes(j);
  }
  result.mutable_accepted_nodes()->Add(item.accepted_nodes.begin(), item.accepted_nodes.end());
  Report(request, std::move(result), events);
}

void TargetEngine::ResolveOwnToken(WorkItem& item, absl::Time now,
                                   std::vector<TargetEvent>* events) {
  TargetRequest& request = *item.request;
  if (!item.outcome.ok()) {
    SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << item.outcome.status();
    request.Finish(proto::FINISH_REASON_ERROR);
    Report(request, request.FullSequenceResult(), events);
    return;
  }
  ++counters_.own_tokens;
  Report(request,
         request.ApplyOutcome(nullptr, *item.outcome, std::nullopt, now, CommittedLogprobs(item)),
         events, /*own_token=*/true);
}

std::vector<spec::TokenLogprob> TargetEngine::CommittedLogprobs(const WorkItem& item) const {
  const std::optional<int>& top_n = item.request->params().logprobs;
  std::vector<spec::TokenLogprob> entries;
  if (!top_n.has_value()) return entries;
  // Committed token j sits at frontier + j, whose row is rows[j] (a correction's
  // and a bonus's rows included): the verifier's own rows.
  const std::vector<int32_t>& committed = item.outcome->committed;
  for (size_t j = 0; j < committed.size() && j < item.rows.size(); ++j) {
    if (item.rows[j].logprobs.empty()) break;  // never: such requests' rows are on the host
    entries.push_back(spec::TokenLogprobAt(item.rows[j].logprobs, committed[j], *top_n));
  }
  return entries;
}

void TargetEngine::Report(TargetRequest& request, proto::VerifyResult result,
                          std::vector<TargetEvent>* events, bool own_token) {
  if (forward_cost_.measured()) {
    result.set_target_step_seconds(forward_cost_.BaseSeconds());
    result.set_target_verify_slope(forward_cost_.Slope());
  }
  const std::string draft_peer = request.draft_worker_id() == 0
                                     ? std::string()
                                     : net::DraftPeerName(request.draft_worker_id());
  // Whatever the draft was not told yet goes first: its results must stay contiguous.
  auto flush_held = [&] {
    if (std::optional<proto::VerifyResult> held = request.TakeHeldForDraft(); held.has_value())
      events->push_back({*std::move(held), draft_peer, false});
  };
  if (request.finished()) {
    // The coordinator gets the whole sequence, so a lost update never leaves a gap at the end.
    events->push_back({request.FullSequenceResult(), "", true});
    if (!draft_peer.empty()) {
      flush_held();
      events->push_back({std::move(result), draft_peer, false});
    }
    return;
  }
  if (own_token && !draft_peer.empty() && request.HoldsForDraft()) {
    // An off window whose draft asked for its tokens every window_result_tokens steps.
    request.HoldForDraft(result);
    events->push_back({std::move(result), "", true});
    if (request.held_for_draft_tokens() >= request.window_result_tokens()) flush_held();
    return;
  }
  if (!draft_peer.empty()) flush_held();
  events->push_back({std::move(result), draft_peer, true});
}

}  // namespace splitspec::target
