#include "target_worker/target_engine.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/memory_amount.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/spec_policy.h"

#include "runtime/spec/token_logprobs.h"
#include "runtime/spec/tree_verify.h"
#include "runtime/spec/verify.h"
#include "target_worker/grammar_rows.h"
#include "target_worker/request_setup.h"
#include "target_worker/target_engine_work_item.h"

namespace splitspec::target {

namespace {
// The forward-cost line's prior slope (before two sizes are timed) and decay.
constexpr double kForwardCostPriorSlope = 0.25;
constexpr double kForwardCostDecay = 0.9;

// What the CUDA verifier does not do: context processors, a grammar mask, log
// probabilities (it makes p with temperature / top-k / top-p / min-p only).
bool NeedsHostRows(const spec::SamplingParams& params) {
  return params.has_context_processors() || params.grammar.has_value() ||
         params.logprobs.has_value();
}

// A block whose parents branch (a tree that is not a chain): verified from one tree
// forward. A block with chain-shaped parents is verified as the chain it is.
bool BranchesTree(const proto::DraftBlock& block) {
  for (int i = 0; i < block.parents_size(); ++i) {
    if (block.parents(i) != i - 1) return true;
  }
  return false;
}
}  // namespace

TargetEngine::TargetEngine(model::LanguageModel* model, TargetEngineOptions options)
    : model_(model),
      options_(std::move(options)),
      forward_cost_(kForwardCostPriorSlope, kForwardCostDecay),
      kv_budget_(options_.kv_cache_bytes) {}

absl::Status TargetEngine::UseDeviceRows(std::unique_ptr<DeviceRows> rows) {
  if (rows == nullptr || rows->slots() < options_.max_requests) {
    return absl::InvalidArgumentError(
        absl::StrCat("device rows with ", rows == nullptr ? 0 : rows->slots(),
                     " slots for max_requests ", options_.max_requests));
  }
  RETURN_IF_ERROR(model_->KeepLogitsOnDevice(true));
  device_rows_ = std::move(rows);
  free_device_slots_.clear();
  for (int s = device_rows_->slots() - 1; s >= 0; --s) free_device_slots_.push_back(s);
  return absl::OkStatus();
}

void TargetEngine::FreeSlot(const std::string& id) {
  auto it = device_slots_.find(id);
  if (it == device_slots_.end()) return;
  free_device_slots_.push_back(it->second);
  device_slots_.erase(it);
}

bool TargetEngine::VerifiesOnDevice(const TargetRequest& request) const {
  return device_slots_.contains(request.id());
}

TargetRow TargetEngine::KeepRow(const TargetRequest& request, TargetRow row) {
  if (!VerifiesOnDevice(request)) return row;
  const int slot = device_slots_.at(request.id());
  device_rows_->Keep(row.device_row, slot);
  TargetRow kept;
  kept.device_row = device_rows_->SlotRow(slot);
  return kept;
}

absl::Status TargetEngine::AddRequest(const proto::Assignment& assignment) {
  if (auto it = requests_.find(assignment.request_id()); it != requests_.end()) {
    it->second->SetDraftWorker(assignment.draft_worker_id(), assignment.draft_worker_key());
    return absl::OkStatus();
  }
  if (static_cast<int>(requests_.size()) >= options_.max_requests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("target is serving its maximum of ", options_.max_requests, " requests"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TargetRequest> request,
                   NewTargetRequest(assignment, *model_, options_.default_limits));
  if (!kv_budget_.Allows(request->max_kv_bytes())) {
    kv_budget_.CountRefused();
    const model::KvCache& cache = request->cache();
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", assignment.request_id(), " needs up to ", cache.max_tokens(),
        " KV cache positions (prompt ", request->prompt_length(), " + max_tokens ",
        request->max_length() - request->prompt_length(), " + a draft block's slack",
        request->guided() ? ", and as many again for its unconditional companion" : "", ") = ",
        request->max_kv_bytes(), " bytes, more than this target's whole KV cache budget of ",
        kv_budget_.budget_bytes(), " bytes (", FormatBytes(kv_budget_.budget_bytes()),
        ", --kv-cache-memory); shorten the prompt or max_tokens, or raise the budget"));
  }
  if (request->params().grammar.has_value()) {
    const grammar::GrammarSpec& spec = *request->params().grammar;
    if (options_.grammar_compiler == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", assignment.request_id(), ": structured outputs (",
          grammar::GrammarKindName(spec.kind), ") need a grammar compiler on this target"));
    }
    absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled =
        options_.grammar_compiler->Compile(spec);
    if (!compiled.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", assignment.request_id(), ": ", compiled.status().message()));
    }
    RETURN_IF_ERROR(request->AttachGrammar(grammar::GrammarMatcher(*std::move(compiled))));
  }
  if (request->guided()) ++counters_.guided_requests;
  if (device_rows_ != nullptr && !NeedsHostRows(request->params())) {
    // Its p lives on the device (max_requests <= slots: one is free); the
    // others' rows are copied to the host each step (device_rows.h).
    device_slots_[assignment.request_id()] = free_device_slots_.back();
    free_device_slots_.pop_back();
  }
  TargetRequest* added = request.get();
  kv_budget_.Track(&added->cache());
  if (added->guided()) kv_budget_.Track(&added->companion_cache());
  if (kv_budget_.unlimited()) {
    resident_.push_back(added);  // its caches grow as the forward needs
  } else {
    added->set_resident(false);  // Plan admits it when its reservation fits
    waiting_.push_back(added);
  }
  requests_.emplace(assignment.request_id(), std::move(request));
  return absl::OkStatus();
}

void TargetEngine::ForgetKv(TargetRequest& request) {
  kv_budget_.Untrack(&request.cache());
  if (request.guided()) kv_budget_.Untrack(&request.companion_cache());
  std::erase(resident_, &request);
  std::erase(waiting_, &request);
}

uint64_t TargetEngine::ReservationBytes(const TargetRequest& request) const {
  const int wanted = request.frontier() + options_.kv_reserve_tokens;
  const model::KvCache& cache = request.cache();
  uint64_t bytes = cache.BytesAfterReserve(std::min(wanted, cache.max_tokens()));
  if (request.guided()) {
    const model::KvCache& companion = request.companion_cache();
    const int companion_wanted = request.companion_frontier() + options_.kv_reserve_tokens;
    bytes += companion.BytesAfterReserve(std::min(companion_wanted, companion.max_tokens()));
  }
  return bytes;
}

bool TargetEngine::AdmitNext(uint64_t* kv_used) {
  if (waiting_.empty()) return false;
  TargetRequest& request = *waiting_.front();
  const uint64_t reservation = ReservationBytes(request) - request.kv_bytes();
  if (!kv_budget_.Allows(*kv_used + reservation)) {
    if (!request.kv_waited()) {
      request.set_kv_waited(true);
      kv_budget_.CountWait();
    }
    return false;
  }
  // Reserve now: the budget holds the room from the admission on.
  model::KvCache& cache = request.cache();
  absl::Status reserved =
      cache.Reserve(std::min(request.frontier() + options_.kv_reserve_tokens, cache.max_tokens()));
  if (reserved.ok() && request.guided()) {
    model::KvCache& companion = request.companion_cache();
    reserved = companion.Reserve(std::min(request.companion_frontier() + options_.kv_reserve_tokens,
                                          companion.max_tokens()));
  }
  if (!reserved.ok()) {  // a device out of memory: wait for a request to finish
    SPLITSPEC_LOG(WARNING) << "request " << request.id() << " waits for KV memory: " << reserved;
    return false;
  }
  waiting_.pop_front();
  request.set_resident(true);
  resident_.push_back(&request);
  *kv_used += reservation;
  kv_budget_.ObserveUsed();
  return true;
}

void TargetEngine::EvictNewest() {
  TargetRequest& request = *resident_.back();
  resident_.pop_back();
  kv_budget_.Untrack(&request.cache());
  if (request.guided()) kv_budget_.Untrack(&request.companion_cache());
  request.ReplaceCaches(
      model_->NewCache(request.cache().max_tokens()),
      request.guided() ? model_->NewCache(request.companion_cache().max_tokens()) : nullptr);
  kv_budget_.Track(&request.cache());
  if (request.guided()) kv_budget_.Track(&request.companion_cache());
  request.set_resident(false);
  waiting_.push_front(&request);
  kv_budget_.CountPreemption();
  SPLITSPEC_LOG(INFO) << "request " << request.id() << " evicted to free KV memory (budget "
                      << FormatBytes(kv_budget_.budget_bytes()) << "); it recomputes its "
                      << request.frontier() << " committed tokens when room returns";
}

bool TargetEngine::MakeKvRoom(const WorkItem& item, uint64_t* kv_used) {
  TargetRequest& request = *item.request;
  uint64_t growth = 0;
  if (!item.tokens.empty()) {
    const model::KvCache& cache = request.cache();
    growth += cache.BytesAfterReserve(cache.length() + static_cast<int>(item.tokens.size())) -
              cache.memory_bytes();
  }
  if (!item.companion_tokens.empty()) {
    const model::KvCache& companion = request.companion_cache();
    growth += companion.BytesAfterReserve(companion.length() +
                                          static_cast<int>(item.companion_tokens.size())) -
              companion.memory_bytes();
  }
  while (!kv_budget_.Allows(*kv_used + growth)) {
    TargetRequest* newest = resident_.back();
    *kv_used -= newest->kv_bytes();
    EvictNewest();
    if (newest == &request) return false;
  }
  *kv_used += growth;
  return true;
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

absl::Status TargetEngine::CheckDraftPeer(const std::string& request_id, const std::string& peer,
                                          const std::string& peer_key) const {
  const TargetRequest* request = Find(request_id);
  if (request == nullptr)
    return absl::NotFoundError(absl::StrCat("no request '", request_id, "' on this target"));
  if (request->draft_worker_id() == 0 || net::DraftPeerName(request->draft_worker_id()) != peer) {
    return absl::PermissionDeniedError(absl::StrCat(
        "'", peer, "' is not the draft worker assigned to request '", request_id, "'"));
  }
  // The peer name is the sender's choice; the key is not (CURVE proved it).
  const std::string& assigned_key = request->draft_worker_key();
  if (!assigned_key.empty() && !peer_key.empty() && assigned_key != peer_key) {
    return absl::PermissionDeniedError(absl::StrCat(
        "key ", peer_key, " of '", peer, "' is not the key of draft worker ",
        request->draft_worker_id(), ", which request '", request_id, "' is assigned to"));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::VerifyResult> TargetEngine::SyncResult(const std::string& request_id) const {
  const TargetRequest* request = Find(request_id);
  if (request == nullptr)
    return absl::NotFoundError(absl::StrCat("no request '", request_id, "' on this target"));
  return request->FullSequenceResult();
}

void TargetEngine::Release(const std::string& request_id) {
  if (auto it = requests_.find(request_id); it != requests_.end()) ForgetKv(*it->second);
  requests_.erase(request_id);
  FreeSlot(request_id);
  feed_waits_missed_.erase(request_id);
}

const TargetRequest* TargetEngine::Find(const std::string& id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

bool TargetEngine::DecidesAlone(const TargetRequest& request, absl::Time now) const {
  return request.draft_worker_id() == 0 || request.in_alone_window() ||
         now - request.waiting_since() >= options_.block_wait;
}

absl::Duration TargetEngine::FeedWait() const {
  if (!options_.feed_wait_from_forwards || !forward_cost_.measured()) return options_.feed_wait;
  const double pays = forward_cost_.BaseSeconds() * (1.0 - forward_cost_.Slope());
  return std::max(options_.feed_wait, absl::Seconds(std::max(0.0, pays)));
}

bool TargetEngine::WaitsToFeed(const TargetRequest& request, absl::Time now) const {
  return request.expects_block_to_feed() && !request.has_pending() && !request.prefilling() &&
         request.draft_worker_id() != 0 && request.ReadyBlock() == nullptr &&
         now - request.waiting_since() < FeedWait();
}

bool TargetEngine::HasWork(absl::Time now) const {
  if (!waiting_.empty() &&
      kv_budget_.Allows(kv_budget_.used_bytes() + ReservationBytes(*waiting_.front()) -
                        waiting_.front()->kv_bytes())) {
    return true;  // a waiting request can start
  }
  for (const TargetRequest* request : resident_) {
    if (request->finished()) return true;
    if (!request->has_pending()) {  // prefill or an unfed token to feed
      if (WaitsToFeed(*request, now)) continue;
      return true;
    }
    if (request->ReadyBlock() != nullptr || DecidesAlone(*request, now)) return true;
  }
  return false;
}

absl::Time TargetEngine::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const TargetRequest* request : resident_) {
    if (request->has_pending() && request->ReadyBlock() == nullptr) {
      next = std::min(next, request->waiting_since() + options_.block_wait);
    }
    if (request->expects_block_to_feed() && !request->has_pending()) {
      next = std::min(next, request->waiting_since() + FeedWait());
    }
  }
  return next;
}

absl::Status TargetEngine::Step(absl::Time now, std::vector<TargetEvent>* events,
                                const std::function<void()>& after_forward) {
  std::vector<WorkItem> items = Plan(now);
  const absl::Status forward = Forward(items, events);
  kv_budget_.ObserveUsed();  // the caches are at their largest of the step now
  // New blocks go into the requests' maps, which keeps the items' block pointers valid.
  if (after_forward) after_forward();
  {
    ScopedTrace span("target.phase", "verify");
    Verify(items, now);
  }
  {
    ScopedTrace span("target.phase", "resolve");
    // Commits are stamped after the forward: feed_wait counts from there.
    Resolve(items, options_.clock ? std::max(now, options_.clock()) : now, events);
    ReapFinished();
  }
  if (device_rows_ != nullptr) {
    const absl::Status kept = device_rows_->EndStep();
    if (forward.ok()) return kept;
  }
  return forward;
}

void TargetEngine::CutBlocksToBudget() {
  if (!options_.cut_blocks_to_budget || !forward_cost_.measured()) return;
  std::vector<TargetRequest*> holding;
  std::vector<spec::VerifyCandidate> candidates;
  int deciding = 0;
  for (TargetRequest* request : resident_) {
    if (request->finished() || request->prefilling()) continue;
    ++deciding;
    const proto::DraftBlock* ready = request->ReadyBlock();
    if (ready == nullptr || ready->tokens_size() == 0 || !ready->policy_sized()) continue;
    const spec::SpecMetrics& seen = request->metrics();
    holding.push_back(request);
    spec::VerifyCandidate candidate{.accepted = static_cast<double>(seen.accepted),
                                    .verified = static_cast<double>(seen.verified),
                                    .drafted = ready->tokens_size()};
    if (ready->acceptance_size() == ready->tokens_size())  // else unknown (protocol.md)
      candidate.acceptance = absl::MakeConstSpan(ready->acceptance().data(), ready->acceptance_size());
    candidates.push_back(candidate);
  }
  if (candidates.empty()) return;
  const std::vector<int> kept =
      spec::ChooseVerifiedDrafts(candidates, deciding, forward_cost_.Slope());
  for (size_t i = 0; i < holding.size(); ++i) {
    const int cut = candidates[i].drafted - kept[i];
    if (cut == 0) continue;
    holding[i]->CutReadyBlock(kept[i]);
    counters_.cut_draft_tokens += static_cast<uint64_t>(cut);
  }
}

std::vector<TargetEngine::WorkItem> TargetEngine::Plan(absl::Time now) {
  CutBlocksToBudget();
  std::vector<WorkItem> items;
  int budget = options_.step_token_budget;
  bool fed_any = false;
  uint64_t kv_used = kv_budget_.used_bytes();
  // Oldest admission first; past the last resident request, the waiting ones
  // start while their reservations fit (and are planned in this step).
  for (size_t i = 0; i < resident_.size() || AdmitNext(&kv_used); ++i) {
    TargetRequest* request = resident_[i];
    if (request->finished()) continue;
    std::optional<WorkItem> item = PlanRequest(*request, now, budget);
    if (!item.has_value()) continue;
    const int size = static_cast<int>(item->tokens.size() + item->companion_tokens.size());
    // A decision from pending p costs no budget. The first fed item always
    // runs, so a large block can never starve.
    if (size > 0 && fed_any && size > budget) continue;
    // Only newer requests are evicted for it; if it is itself the newest, it
    // was the last in the loop.
    if (!MakeKvRoom(*item, &kv_used)) break;
    budget -= size;
    fed_any = fed_any || size > 0;
    items.push_back(*std::move(item));
  }
  return items;
}

void TargetEngine::CountFeedWait(TargetRequest& request, bool block_ready) {
  if (!request.expects_block_to_feed()) return;
  if (block_ready) {
    feed_waits_missed_.erase(request.id());
    return;
  }
  int& missed = feed_waits_missed_[request.id()];
  if (++missed >= 2) {
    request.FeedWaitMissed();
    missed = 0;
  }
}

std::optional<TargetEngine::WorkItem> TargetEngine::PlanRequest(TargetRequest& request,
                                                                absl::Time now, int budget) {
  const int length = request.cache().length();
  const int frontier = request.frontier();
  if (const proto::DraftBlock* tree = request.ReadyBlock();
      tree != nullptr && BranchesTree(*tree) && !RunsTree(request)) {
    request.FlattenReadyTree();
  }
  const proto::DraftBlock* ready = request.ReadyBlock();
  if (ready != nullptr && !request.prefilling() && BranchesTree(*ready)) {
    return PlanTree(request, *ready);
  }
  WorkItem item;
  item.request = &request;
  item.fed_from = length;
  if (request.guided() && request.prefilling()) {
    PlanGuidedPrefill(item, budget);
    return item;
  }
  if (request.prefilling()) {
    const int chunk = std::min({options_.prefill_chunk, frontier - length, std::max(budget, 1)});
    item.tokens.assign(request.committed().begin() + length,
                       request.committed().begin() + length + chunk);
    item.prefill = true;
    if (length + chunk == frontier) {
      item.logits = model::LogitsMode::kLast;
      // The step budget's edge case: drafts ready before the prompt's last chunk
      // could only be verified a step later, delaying the first token by a whole
      // step for what the next block (drafted after it) verifies as well. So a
      // policy-sized block is cut to nothing and the first token decided now.
      if (ready != nullptr && ready->tokens_size() > 0 && ready->policy_sized() &&
          options_.cut_blocks_to_budget) {
        counters_.cut_draft_tokens += static_cast<uint64_t>(ready->tokens_size());
        request.CutReadyBlock(0);
      }
      // An empty block needs only p at the frontier, which this chunk gives.
      if (ready != nullptr && ready->tokens_size() == 0) item.block = ready;
    }
  } else if (!request.has_pending()) {  // unfed: feed the last committed token
    if (ready == nullptr && WaitsToFeed(request, now)) return std::nullopt;
    CountFeedWait(request, ready != nullptr);
    item.feeds_unfed = true;
    item.tokens.push_back(request.committed().back());
    item.block = ready;
    if (ready != nullptr) {
      item.tokens.insert(item.tokens.end(), ready->tokens().begin(), ready->tokens().end());
    }
    item.logits = model::LogitsMode::kAll;
  } else if (ready != nullptr && ready->tokens_size() > 0) {  // p pending: feed the block
    item.block = ready;
    item.tokens.assign(ready->tokens().begin(), ready->tokens().end());
    item.logits = model::LogitsMode::kAll;
  } else if (ready != nullptr || DecidesAlone(request, now)) {
    // p pending and an empty block, or no block and no more waiting: decided
    // from p, nothing to feed.
    item.block = ready;
  } else {
    return std::nullopt;  // waits for a block
  }
  if (request.guided() && !item.tokens.empty()) {
    // The companion is fed the same tokens in the same forward; only the unfed
    // token differs (each sequence's own last token).
    item.companion_tokens = item.tokens;
    if (item.feeds_unfed) {
      item.companion_tokens[0] = request.CompanionToken(request.companion_frontier() - 1);
    }
  }
  return item;
}

bool TargetEngine::RunsTree(const TargetRequest& request) const {
  // The rows of a tree are read as a chain's are only without what reads the tokens
  // before a row (penalties, a grammar) or a second sequence (guidance), and only
  // the host verifier has the tree rule.
  return model_->RunsTrees() && device_rows_ == nullptr && !request.guided() &&
         !request.params().has_context_processors() && !request.params().grammar.has_value();
}

std::optional<TargetEngine::WorkItem> TargetEngine::PlanTree(TargetRequest& request,
                                                             const proto::DraftBlock& block) {
  // The forward's tree has one root: the last committed token. With p pending it
  // is in the cache already and is fed again (the forward recomputes its row,
  // bitwise the pending one); unfed, it is fed as a chain's block would feed it.
  WorkItem item;
  item.request = &request;
  item.fed_from = request.frontier() - 1;
  item.refeeds_root = request.has_pending();
  if (!item.refeeds_root) CountFeedWait(request, true);
  item.feeds_unfed = true;
  item.block = &block;
  item.tokens.push_back(request.committed().back());
  item.tokens.insert(item.tokens.end(), block.tokens().begin(), block.tokens().end());
  item.tree_parents = spec::TreeForwardParents(block.parents());
  item.logits = model::LogitsMode::kAll;
  return item;
}

void TargetEngine::PlanGuidedPrefill(WorkItem& item, int budget) const {
  TargetRequest& request = *item.request;
  const int length = request.cache().length();
  const int companion_length = request.companion_cache().length();
  // Both prompts stop one token short: the last token of each is fed with the
  // first block (see target_request.h), so no prefill needs logits.
  const int left = std::max(request.frontier() - 1 - length, 0);
  const int companion_left = std::max(request.companion_frontier() - 1 - companion_length, 0);
  const int share = std::max(left > 0 && companion_left > 0 ? budget / 2 : budget, 1);
  const int chunk = std::min({options_.prefill_chunk, left, share});
  const int companion_chunk = std::min({options_.prefill_chunk, companion_left, share});
  item.prefill = true;
  item.tokens.assign(request.committed().begin() + length,
                     request.committed().begin() + length + chunk);
  for (int i = companion_length; i < companion_length + companion_chunk; ++i) {
    item.companion_tokens.push_back(request.CompanionToken(i));
  }
}

absl::Status TargetEngine::Forward(std::vector<WorkItem>& items, std::vector<TargetEvent>* events) {
  std::vector<model::SequenceInput> batch;
  for (WorkItem& item : items) {
    if (!item.tokens.empty()) {
      // A refed root goes where it was: the cache drops it (p pending is recomputed).
      if (item.refeeds_root) item.request->TruncateCaches(item.fed_from);
      item.batch_index = static_cast<int>(batch.size());
      batch.push_back({&item.request->cache(), item.tokens, item.logits, item.tree_parents});
    }
    if (!item.companion_tokens.empty()) {
      item.companion_batch_index = static_cast<int>(batch.size());
      batch.push_back({&item.request->companion_cache(), item.companion_tokens, item.logits});
    }
  }
  if (batch.empty()) return absl::OkStatus();
  model::ForwardOutput out;
  const absl::Time forward_start = options_.clock ? options_.clock() : absl::Now();
  absl::Status forward;
  {
    ScopedTrace span("target.phase", "forward");  // the model alone, within "verify step"
    forward = model_->Forward(batch, &out);
  }
  if (forward.ok()) {
    RecordForwardCost(items, forward_start, options_.clock ? options_.clock() : absl::Now());
  }
  if (forward.ok() && device_rows_ != nullptr) forward = LoadDeviceRows(items, out);
  if (!forward.ok()) {
    // The model left every cache as it was, or the caches grew but the rows
    // could not be kept: either way the fed requests end with an error.
    FailFed(items, events);
    return forward;
  }
  ++counters_.steps;
  for (const WorkItem& item : items) {
    counters_.forward_tokens += item.tokens.size() + item.companion_tokens.size();
    counters_.companion_forward_tokens += item.companion_tokens.size();
    item.request->AddCompanionForwardTokens(static_cast<int>(item.companion_tokens.size()));
  }
  ScopedTrace span("target.phase", "rows");
  for (WorkItem& item : items) {
    if (item.batch_index >= 0) ReadRows(item, out, events);
  }
  return absl::OkStatus();
}

void TargetEngine::FailFed(std::vector<WorkItem>& items, std::vector<TargetEvent>* events) {
  for (WorkItem& item : items) {
    if (item.batch_index < 0 && item.companion_batch_index < 0) continue;
    item.request->Finish(proto::FINISH_REASON_ERROR);
    Report(*item.request, item.request->FullSequenceResult(), events);
  }
}

absl::Status TargetEngine::LoadDeviceRows(const std::vector<WorkItem>& items,
                                          const model::ForwardOutput& out) {
  std::vector<GuidedRows> guided;
  for (const WorkItem& item : items) {
    if (item.batch_index < 0 || item.companion_batch_index < 0) continue;
    // A host-pipeline request's rows stay raw: ReadRows combines them on the host.
    if (!VerifiesOnDevice(*item.request)) continue;
    const int rows = out.num_rows[item.batch_index];
    // A mismatch is reported by ReadRows; only matching pairs are combined.
    if (rows == 0 || out.num_rows[item.companion_batch_index] != rows) continue;
    guided.push_back({out.first_row[item.batch_index], out.first_row[item.companion_batch_index],
                      rows, item.request->params().guidance_scale});
  }
  return device_rows_->LoadStep(out, guided);
}

void TargetEngine::RecordForwardCost(const std::vector<WorkItem>& items, absl::Time start,
                                     absl::Time end) {
  int fed = 0;
  for (const WorkItem& item : items) {
    if (item.prefill) return;  // a prompt chunk's forward is not a decode step's
    fed += static_cast<int>(item.tokens.size() + item.companion_tokens.size());
  }
  if (fed > 0) forward_cost_.Record(fed - 1, absl::ToDoubleSeconds(end - start));
}

void TargetEngine::ReadRows(WorkItem& item, const model::ForwardOutput& out,
                            std::vector<TargetEvent>* events) {
  TargetRequest& request = *item.request;
  const int vocab = out.vocab_size;
  const int rows = out.num_rows[item.batch_index];
  const bool guided = request.guided() && rows > 0;
  if (guided &&
      (item.companion_batch_index < 0 || out.num_rows[item.companion_batch_index] != rows)) {
    SPLITSPEC_LOG(ERROR) << "request " << request.id()
                         << ": the forward gave the unconditional companion no matching rows";
    request.Finish(proto::FINISH_REASON_ERROR);
    Report(request, request.FullSequenceResult(), events);
    return;
  }
  if (VerifiesOnDevice(request)) {  // p stays on the device: rows are indices (LoadDeviceRows)
    for (int r = 0; r < rows; ++r) {
      TargetRow row;
      row.device_row = device_rows_->StepRow(out.first_row[item.batch_index] + r);
      item.rows.push_back(std::move(row));
    }
    return;
  }
  // The host pipeline, from the forward's logits [rows, vocab] (and the
  // companion's): on the host already, or copied from a device store (device_rows.h).
  absl::Span<const float> cond_logits, uncond_logits;
  std::vector<float> copied;
  if (rows > 0 && device_rows_ != nullptr) {
    const size_t size = static_cast<size_t>(rows) * vocab;
    copied.resize(guided ? 2 * size : size);
    absl::Status status = device_rows_->CopyRowsToHost(
        device_rows_->StepRow(out.first_row[item.batch_index]), rows,
        absl::MakeSpan(copied).first(size));
    if (status.ok() && guided) {
      status = device_rows_->CopyRowsToHost(
          device_rows_->StepRow(out.first_row[item.companion_batch_index]), rows,
          absl::MakeSpan(copied).subspan(size));
    }
    if (!status.ok()) {
      SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << status;
      request.Finish(proto::FINISH_REASON_ERROR);
      Report(request, request.FullSequenceResult(), events);
      return;
    }
    counters_.host_rows_copied += copied.size() / vocab;
    cond_logits = absl::MakeConstSpan(copied).first(size);
    if (guided) uncond_logits = absl::MakeConstSpan(copied).subspan(size);
  } else if (rows > 0) {
    cond_logits = absl::MakeConstSpan(out.Row(item.batch_index, 0), static_cast<size_t>(rows) * vocab);
    if (guided) {
      uncond_logits = absl::MakeConstSpan(out.Row(item.companion_batch_index, 0),
                                          static_cast<size_t>(rows) * vocab);
    }
  }
  // The context processors read the tokens before each row's position: the
  // cache's tokens, then those fed this step up to the row (the last row follows
  // every fed token, a block's row r its first r drafted tokens after the unfed one).
  std::vector<int32_t> sequence;
  if (request.params().has_context_processors()) {
    sequence.assign(request.committed().begin(), request.committed().begin() + item.fed_from);
    sequence.insert(sequence.end(), item.tokens.begin(), item.tokens.end());
  }
  // Structured outputs: the fed tokens past the frontier are drafted; the
  // matcher holds the committed ones (grammar_rows.h).
  std::optional<GrammarRows> masks;
  if (grammar::GrammarMatcher* matcher = request.grammar(); matcher != nullptr && rows > 0) {
    const int fed_end = item.fed_from + static_cast<int>(item.tokens.size());
    const int drafted = std::clamp(fed_end - request.frontier(), 0,
                                   static_cast<int>(item.tokens.size()));
    absl::StatusOr<GrammarRows> made =
        GrammarRowMasks(*matcher, absl::MakeConstSpan(item.tokens).last(drafted), rows);
    if (!made.ok()) {
      SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << made.status();
      request.Finish(proto::FINISH_REASON_ERROR);
      Report(request, request.FullSequenceResult(), events);
      return;
    }
    masks = *std::move(made);
  }
  // A plain greedy request (no processors, grammar, guidance or logprobs) decides
  // from each row's argmax alone: its p is that token's one-hot, kept as the token
  // (the verification reads nothing else; a tree's rows stay whole for VerifyTree).
  const bool greedy_tokens = request.mode() == spec::VerifyMode::kGreedy &&
                             request.params().greedy() && !guided &&
                             !request.params().has_context_processors() &&
                             !masks.has_value() && !request.params().logprobs.has_value() &&
                             item.tree_parents.empty();
  if (greedy_tokens) {
    for (int r = 0; r < rows; ++r) {
      absl::StatusOr<int32_t> token =
          spec::GreedyToken(cond_logits.subspan(static_cast<size_t>(r) * vocab, vocab));
      if (!token.ok()) {
        SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << token.status();
        request.Finish(proto::FINISH_REASON_ERROR);
        Report(request, request.FullSequenceResult(), events);
        return;
      }
      TargetRow row;
      row.greedy_token = *token;
      item.rows.push_back(std::move(row));
    }
    return;
  }
  for (int r = 0; r < rows; ++r) {
    std::vector<float> probs(vocab);
    const auto cond = cond_logits.subspan(static_cast<size_t>(r) * vocab, vocab);
    const auto uncond =
        guided ? uncond_logits.subspan(static_cast<size_t>(r) * vocab, vocab)
               : absl::Span<const float>();
    spec::RowContext context;
    if (!sequence.empty()) {
      context.tokens = absl::MakeConstSpan(sequence).first(sequence.size() - (rows - 1 - r));
      context.prompt_length = request.prompt_length();
    }
    if (masks.has_value() && masks->masked[r]) context.allowed = masks->Row(r);
    absl::Status status =
        guided ? spec::GuidedProcessRow(request.params(), context, cond, uncond,
                                        absl::MakeSpan(probs))
               : spec::ProcessRow(request.params(), context, cond, absl::MakeSpan(probs));
    std::vector<float> logprobs;
    if (status.ok() && request.params().logprobs.has_value()) {
      // The row verification reads, so logprobs cost no forward (token_logprobs.h).
      logprobs.resize(vocab);
      status = spec::LogprobRow(request.params(), context, cond, uncond, probs,
                                absl::MakeSpan(logprobs));
    }
    if (!status.ok()) {
      SPLITSPEC_LOG(ERROR) << "request " << request.id() << ": " << status;
      request.Finish(proto::FINISH_REASON_ERROR);
      Report(request, request.FullSequenceResult(), events);
      return;
    }
    TargetRow row;
    row.probs = std::move(probs);
    row.logprobs = std::move(logprobs);
    item.rows.push_back(std::move(row));
  }
}

void TargetEngine::ReapFinished() {
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (!it->second->finished()) {
      ++it;
      continue;
    }
    FreeSlot(it->first);
    feed_waits_missed_.erase(it->first);
    ForgetKv(*it->second);
    it = requests_.erase(it);
  }
}

}  // namespace splitspec::target
