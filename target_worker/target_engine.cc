#include "target_worker/target_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/sampling.h"
#include "target_worker/request_setup.h"

namespace splitspec::target {

// One request's share of a step.
struct TargetEngine::WorkItem {
  TargetRequest* request = nullptr;
  std::vector<int32_t> tokens;  // fed this step, at positions cache.length() ...
  model::LogitsMode logits = model::LogitsMode::kNone;
  const proto::DraftBlock* block = nullptr;  // verified this step, if any
  bool feeds_unfed = false;  // tokens[0] is the last committed token
  bool prefill = false;
};

TargetEngine::TargetEngine(model::LanguageModel* model, TargetEngineOptions options)
    : model_(model), options_(std::move(options)) {}

absl::Status TargetEngine::AddRequest(const proto::Assignment& assignment) {
  if (auto it = requests_.find(assignment.request_id()); it != requests_.end()) {
    it->second->SetDraftWorker(assignment.draft_worker_id());
    return absl::OkStatus();
  }
  if (static_cast<int>(requests_.size()) >= options_.max_requests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("target is serving its maximum of ", options_.max_requests, " requests"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TargetRequest> request,
                   NewTargetRequest(assignment, *model_, options_.default_limits));
  requests_.emplace(assignment.request_id(), std::move(request));
  return absl::OkStatus();
}

BlockAdmission TargetEngine::AddBlock(const proto::DraftBlock& block, const std::string& peer) {
  auto it = requests_.find(block.request_id());
  if (it == requests_.end()) {
    ++counters_.stale_blocks;
    return BlockAdmission::kFinished;
  }
  const BlockAdmission admission = it->second->AdmitBlock(block);
  if (admission == BlockAdmission::kMalformed) ++counters_.malformed_blocks;
  if (admission == BlockAdmission::kStaleEpoch || admission == BlockAdmission::kStaleStart ||
      admission == BlockAdmission::kDuplicate) {
    ++counters_.stale_blocks;
  }
  return admission;
}

absl::StatusOr<proto::VerifyResult> TargetEngine::SyncResult(const std::string& request_id) const {
  const TargetRequest* request = Find(request_id);
  if (request == nullptr) return absl::NotFoundError(absl::StrCat("no request '", request_id, "' on this target"));
  return request->FullSequenceResult();
}

void TargetEngine::Release(const std::string& request_id) { requests_.erase(request_id); }

const TargetRequest* TargetEngine::Find(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

bool TargetEngine::DecidesAlone(const TargetRequest& request, absl::Time now) const {
  return request.draft_worker_id() == 0 || now - request.waiting_since() >= options_.block_wait;
}

bool TargetEngine::HasWork(absl::Time now) const {
  for (const auto& [id, request] : requests_) {
    if (request->finished()) return true;
    if (!request->has_pending()) return true;  // prefill or an unfed token to feed
    if (request->ReadyBlock() != nullptr || DecidesAlone(*request, now)) return true;
  }
  return false;
}

absl::Time TargetEngine::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, request] : requests_) {
    if (request->has_pending() && request->ReadyBlock() == nullptr) {
      next = std::min(next, request->waiting_since() + options_.block_wait);
    }
  }
  return next;
}

std::vector<TargetEngine::WorkItem> TargetEngine::Plan(absl::Time now) {
  std::vector<WorkItem> items;
  int budget = options_.step_token_budget;
  for (auto& [id, request_ptr] : requests_) {
    TargetRequest& request = *request_ptr;
    if (request.finished()) continue;
    const int length = request.cache().length();
    const int frontier = request.frontier();
    WorkItem item;
    item.request = &request;
    if (request.prefilling()) {
      const int chunk = std::min({options_.prefill_chunk, frontier - length, std::max(budget, 1)});
      item.tokens.assign(request.committed().begin() + length, request.committed().begin() + length + chunk);
      item.logits = length + chunk == frontier ? model::LogitsMode::kLast : model::LogitsMode::kNone;
      item.prefill = true;
    } else {
      item.block = request.ReadyBlock();
      if (length == frontier - 1) {
        item.feeds_unfed = true;
        item.tokens.push_back(request.committed().back());
      } else if (item.block == nullptr || item.block->tokens_size() == 0) {
        continue;  // pending: waiting for a block, or handled without a forward
      }
      if (item.block != nullptr) item.tokens.insert(item.tokens.end(), item.block->tokens().begin(), item.block->tokens().end());
      item.logits = model::LogitsMode::kAll;
    }
    // The first item always runs, so a large block can never starve.
    if (!items.empty() && static_cast<int>(item.tokens.size()) > budget) continue;
    budget -= static_cast<int>(item.tokens.size());
    items.push_back(std::move(item));
    if (budget <= 0) break;
  }
  return items;
}

absl::Status TargetEngine::Step(absl::Time now, std::vector<TargetEvent>* events) {
  // Requests that have p for the frontier need no forward when their block is
  // empty, or when they have no block and may not wait longer.
  for (auto& [id, request] : requests_) {
    if (request->finished() || !request->has_pending()) continue;
    const proto::DraftBlock* block = request->ReadyBlock();
    if (block != nullptr && block->tokens_size() == 0) {
      WorkItem item;
      item.request = request.get();
      item.block = block;
      VerifyItem(item, {request->pending_probs()}, now, events);
    } else if (block == nullptr && DecidesAlone(*request, now)) {
      DecodeAlone(*request, request->pending_probs(), now, events);
    }
  }
  std::vector<WorkItem> items = Plan(now);
  if (!items.empty()) {
    std::vector<model::SequenceInput> batch;
    batch.reserve(items.size());
    for (const WorkItem& item : items) batch.push_back({&item.request->cache(), item.tokens, item.logits});
    model::ForwardOutput out;
    absl::Status forward = model_->Forward(batch, &out);
    if (!forward.ok()) {
      for (WorkItem& item : items) {
        item.request->Finish(proto::FINISH_REASON_ERROR);
        Report(*item.request, item.request->FullSequenceResult(), events);
      }
      ReapFinished();
      return forward;
    }
    ++counters_.steps;
    for (const WorkItem& item : items) counters_.forward_tokens += item.tokens.size();
    for (size_t i = 0; i < items.size(); ++i) FinishItem(items[i], out, static_cast<int>(i), now, events);
  }
  ReapFinished();
  return absl::OkStatus();
}

void TargetEngine::FinishItem(WorkItem& item, const model::ForwardOutput& out, int index, absl::Time now,
                              std::vector<TargetEvent>* events) {
  TargetRequest& request = *item.request;
  const int vocab = out.vocab_size;
  auto probs_of_row = [&](int row) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> probs(vocab);
    RETURN_IF_ERROR(spec::LogitsToProbs(request.params(), absl::MakeConstSpan(out.Row(index, row), vocab),
                                        absl::MakeSpan(probs)));
    return probs;
  };
  std::vector<std::vector<float>> rows;
  for (int r = 0; r < out.num_rows[index]; ++r) {
    absl::StatusOr<std::vector<float>> probs = probs_of_row(r);
    if (!probs.ok()) {
      SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << probs.status();
      request.Finish(proto::FINISH_REASON_ERROR);
      Report(request, request.FullSequenceResult(), events);
      return;
    }
    rows.push_back(*std::move(probs));
  }
  if (item.prefill) {
    if (!rows.empty()) request.SetPending(std::move(rows[0]));
    return;
  }
  if (item.block == nullptr) {  // fed the unfed token only: p for the frontier
    if (DecidesAlone(request, now)) {
      DecodeAlone(request, rows[0], now, events);
    } else {
      request.SetPending(std::move(rows[0]));
    }
    return;
  }
  if (!item.feeds_unfed) rows.insert(rows.begin(), request.pending_probs());
  VerifyItem(item, std::move(rows), now, events);
}

void TargetEngine::VerifyItem(WorkItem& item, std::vector<std::vector<float>> rows, absl::Time now,
                              std::vector<TargetEvent>* events) {
  TargetRequest& request = *item.request;
  const proto::DraftBlock& block = *item.block;
  const int k = block.tokens_size();
  const int vocab = static_cast<int>(rows[0].size());
  std::vector<float> target_probs;
  target_probs.reserve(static_cast<size_t>(k + 1) * vocab);
  for (const std::vector<float>& row : rows) target_probs.insert(target_probs.end(), row.begin(), row.end());
  std::vector<spec::SparseDistribution> q;
  for (const proto::SparseDistribution& wire : block.q()) {
    q.push_back({{wire.token_ids().begin(), wire.token_ids().end()}, {wire.probs().begin(), wire.probs().end()}});
  }
  std::vector<int32_t> tokens(block.tokens().begin(), block.tokens().end());
  spec::VerifyRequest verify;
  verify.mode = request.mode();
  verify.target_probs = target_probs;
  verify.draft_tokens = tokens;
  if (request.mode() == spec::VerifyMode::kRejection) verify.draft_q_sparse = q;
  verify.seed = request.params().seed;
  verify.start_position = request.frontier();
  // No bonus when the next block is already queued: it verifies that position
  // (an empty block is that position's only block, so it always takes the bonus).
  verify.want_bonus = k == 0 || !request.HasBlockAt(request.frontier() + k);
  absl::StatusOr<spec::VerifyOutcome> outcome = spec::VerifyBlock(verify, vocab);
  if (!outcome.ok()) {
    // A block that cannot be verified (e.g. q(x) = 0 for a drafted token) is
    // dropped; the cache goes back to holding exactly the committed tokens.
    ++counters_.malformed_blocks;
    SPLITSPEC_LOG(WARNING) << "request " << request.id() << ": dropped block at " << block.start() << ": "
                           << outcome.status();
    (void)request.cache().Truncate(request.frontier());
    request.SetPending(std::move(rows[0]));
    request.DropBlocks();
    return;
  }
  std::optional<std::vector<float>> pending_next;
  if (outcome->accepted == k && !verify.want_bonus) pending_next = std::move(rows[k]);
  proto::VerifyResult result = request.ApplyOutcome(&block, *outcome, std::move(pending_next), now);
  Report(request, std::move(result), events);
}

void TargetEngine::DecodeAlone(TargetRequest& request, const std::vector<float>& probs, absl::Time now,
                               std::vector<TargetEvent>* events) {
  absl::StatusOr<int32_t> token =
      spec::ChooseTargetToken(request.mode(), probs, request.params().seed, request.frontier());
  if (!token.ok()) {
    SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << token.status();
    request.Finish(proto::FINISH_REASON_ERROR);
    Report(request, request.FullSequenceResult(), events);
    return;
  }
  ++counters_.own_tokens;
  spec::VerifyOutcome outcome;
  outcome.committed = {*token};
  Report(request, request.ApplyOutcome(nullptr, outcome, std::nullopt, now), events);
}

void TargetEngine::Report(TargetRequest& request, proto::VerifyResult result, std::vector<TargetEvent>* events) {
  const std::string draft_peer =
      request.draft_worker_id() == 0 ? std::string() : net::DraftPeerName(request.draft_worker_id());
  if (request.finished()) {
    // The coordinator gets the whole sequence, so a lost update never leaves a gap at the end.
    events->push_back({request.FullSequenceResult(), "", true});
    if (!draft_peer.empty()) events->push_back({std::move(result), draft_peer, false});
    return;
  }
  events->push_back({std::move(result), draft_peer, true});
}

void TargetEngine::ReapFinished() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    it = it->second->finished() ? requests_.erase(it) : std::next(it);
  }
}

}  // namespace splitspec::target
