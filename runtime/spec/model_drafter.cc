#include "runtime/spec/model_drafter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/sampling_philox.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/spec/tree_expansion.h"
#include "runtime/spec/vocabulary_check.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::spec {

// A tree being grown for one request (see the header and tree_expansion.h).
// Nodes are kept in creation order (level by level, so parents come first);
// FinishTree puts them in depth-first order.
struct ModelDrafter::TreeGrowth {
  int max_nodes = 0;
  int max_depth = 0;
  int level = 1;  // the depth of the children the next forward's rows give
  std::vector<int32_t> tokens;   // per node
  std::vector<int32_t> parents;  // per node: kTreeRoot or an earlier node
  std::vector<double> values;    // per node: product of draft probabilities along its path
  std::vector<int32_t> q_row;    // per node: its parent's row in q_rows (rejection mode)
  std::vector<SparseDistribution> q_rows;
  int32_t first_path_end = kTreeRoot;  // the deepest first-path node so far
  // The nodes whose rows the next forward gives (kTreeRoot: the root's).
  std::vector<int32_t> frontier;
  // The next forward's tree (levels >= 2): row 0 the root (the last held token),
  // row i + 1 node fed[i]; fed holds the frontier and its ancestors.
  std::vector<int32_t> fed;
  std::vector<int32_t> fed_tokens;
  std::vector<int32_t> fed_parents;

  int nodes() const { return static_cast<int>(tokens.size()); }
  // The path's tokens from depth 1 down to `node` (none for the root).
  std::vector<int32_t> PathTokens(int32_t node) const {
    std::vector<int32_t> path;
    for (int32_t v = node; v != kTreeRoot; v = parents[v]) path.push_back(tokens[v]);
    std::reverse(path.begin(), path.end());
    return path;
  }
};

absl::StatusOr<std::unique_ptr<ModelDrafter>> ModelDrafter::Create(
    std::unique_ptr<model::Transformer> draft, const model::Tokenizer& draft_tokenizer,
    const model::Tokenizer& target_tokenizer, int target_vocab_size,
    const ModelDrafterOptions& options) {
  RETURN_IF_ERROR(CheckSameVocabulary(target_tokenizer, draft_tokenizer));
  if (draft->config().vocab_size != target_vocab_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("draft model has ", draft->config().vocab_size,
                     " logits per position, the target ", target_vocab_size));
  }
  if (options.max_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be >= 0, got ", options.max_tokens));
  }
  const int max_tokens =
      options.max_tokens > 0 ? options.max_tokens : draft->config().context_length;
  std::unique_ptr<ModelDrafter> drafter(new ModelDrafter(std::move(draft), max_tokens));
  drafter->SetKvBudget(options.kv_cache_bytes);
  return drafter;
}

absl::StatusOr<std::unique_ptr<ModelDrafter>> ModelDrafter::Load(
    const std::string& path, const model::Tokenizer& target_tokenizer, int target_vocab_size,
    const ModelDrafterOptions& options) {
  model::TransformerOptions transformer_options;
  transformer_options.threads = options.threads;
  transformer_options.device = options.device;
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> draft,
                   model::Transformer::Load(path, transformer_options));
  absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(draft->file());
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("draft model ", path, ": ", tokenizer.status().message()));
  }
  absl::StatusOr<std::unique_ptr<ModelDrafter>> drafter =
      Create(std::move(draft), *tokenizer, target_tokenizer, target_vocab_size, options);
  if (!drafter.ok()) {
    return absl::Status(drafter.status().code(),
                        absl::StrCat("draft model ", path, ": ", drafter.status().message()));
  }
  return drafter;
}

ModelDrafter::ModelDrafter(std::unique_ptr<model::Transformer> draft, int max_tokens)
    : model_(std::move(draft)),
      vocab_(model_->config().vocab_size),
      max_tokens_(max_tokens),
      probs_(vocab_),
      plain_(vocab_) {}

absl::Status ModelDrafter::Start(const std::string& request_id, absl::Span<const int32_t> tokens) {
  if (requests_.contains(request_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("model drafter: request '", request_id, "' already started"));
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model drafter: request '", request_id, "' has no tokens"));
  }
  if (static_cast<int64_t>(tokens.size()) > max_tokens_) {
    return absl::OutOfRangeError(absl::StrCat("model drafter: request '", request_id, "' has ",
                                              tokens.size(), " tokens, the draft cache holds ",
                                              max_tokens_));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_) {
      return absl::InvalidArgumentError(absl::StrCat("model drafter: request '", request_id,
                                                     "' token ", i, " is ", tokens[i],
                                                     ", outside [0, ", vocab_, ")"));
    }
  }
  RequestState state;
  state.cache = model_->NewCache(max_tokens_);
  state.tokens.assign(tokens.begin(), tokens.end());
  state.started = ++next_start_;
  kv_budget_.Track(state.cache.get());
  requests_.emplace(request_id, std::move(state));
  return absl::OkStatus();
}

void ModelDrafter::Release(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  kv_budget_.Untrack(it->second.cache.get());
  requests_.erase(it);
}

void ModelDrafter::EvictCache(RequestState& state) {
  kv_budget_.Untrack(state.cache.get());
  state.cache = model_->NewCache(max_tokens_);
  kv_budget_.Track(state.cache.get());
  kv_budget_.CountPreemption();
}

void ModelDrafter::FitKvBudget(std::vector<Work*>& fed, std::vector<model::SequenceInput>& inputs) {
  if (kv_budget_.unlimited()) return;
  uint64_t used = kv_budget_.used_bytes();
  std::vector<bool> keep(inputs.size(), true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const model::KvCache& cache = *inputs[i].cache;
    const uint64_t growth =
        cache.BytesAfterReserve(cache.length() + static_cast<int>(inputs[i].tokens.size())) -
        cache.memory_bytes();
    while (!kv_budget_.Allows(used + growth)) {
      RequestState* newest = nullptr;  // the newest holding memory, not in this forward
      for (auto& [id, state] : requests_) {
        if (state.cache->memory_bytes() == 0) continue;
        const bool in_forward =
            std::any_of(fed.begin(), fed.end(), [&](const Work* w) { return w->state == &state; });
        if (!in_forward && (newest == nullptr || state.started > newest->started)) newest = &state;
      }
      if (newest == nullptr) break;
      used -= newest->cache->memory_bytes();
      EvictCache(*newest);
    }
    if (kv_budget_.Allows(used + growth)) {
      used += growth;
      continue;
    }
    Work& w = *fed[i];
    Rollback(w);
    w.request->status = absl::ResourceExhaustedError(
        absl::StrCat("model drafter: request '", w.request->request_id, "' needs ", growth,
                     " more bytes of KV cache; the draft worker's KV cache budget of ",
                     kv_budget_.budget_bytes(), " bytes (--kv-cache-memory) holds ", used,
                     " for the requests of this step"));
    used -= cache.memory_bytes();
    EvictCache(*w.state);
    keep[i] = false;
  }
  size_t kept = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!keep[i]) continue;
    fed[kept] = fed[i];
    inputs[kept] = inputs[i];
    ++kept;
  }
  fed.resize(kept);
  inputs.resize(kept);
}

absl::Status ModelDrafter::RestrictTokens(const std::string& request_id,
                                          absl::Span<const uint32_t> allowed) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("model drafter: unknown request '", request_id, "'"));
  }
  const size_t words = (static_cast<size_t>(vocab_) + 31) / 32;
  if (!allowed.empty() && allowed.size() != words) {
    return absl::InvalidArgumentError(absl::StrCat("model drafter: request '", request_id,
                                                   "': a token mask of ", allowed.size(),
                                                   " words; the draft's ", vocab_,
                                                   " logits need ", words));
  }
  it->second.allowed = allowed;
  return absl::OkStatus();
}

absl::Status ModelDrafter::Truncate(const std::string& request_id, int64_t length) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("model drafter: unknown request '", request_id, "'"));
  }
  RequestState& state = it->second;
  if (length < 0 || length > static_cast<int64_t>(state.tokens.size())) {
    return absl::OutOfRangeError(absl::StrCat("model drafter: cannot truncate request '",
                                              request_id, "' to ", length, " tokens, it holds ",
                                              state.tokens.size()));
  }
  state.tokens.resize(length);
  if (state.cache->length() > length)
    RETURN_IF_ERROR(state.cache->Truncate(static_cast<int>(length)));
  return absl::OkStatus();
}

void ModelDrafter::Admit(DraftRequest& request, absl::flat_hash_map<std::string, bool>& seen,
                         std::vector<Work>& work) {
  request.tokens.clear();
  request.parents.clear();
  request.q.clear();
  request.top.clear();
  request.status = absl::OkStatus();
  auto fail = [&request](absl::Status status) { request.status = std::move(status); };
  auto it = requests_.find(request.request_id);
  if (it == requests_.end()) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("model drafter: request '", request.request_id, "' was not started")));
  }
  if (!seen.emplace(request.request_id, true).second) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "model drafter: request '", request.request_id, "' appears twice in one batch")));
  }
  RequestState& state = it->second;
  const size_t held = state.tokens.size();
  if (request.context.size() < held) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "model drafter: request '", request.request_id, "' context has ", request.context.size(),
        " tokens but the drafter holds ", held, "; call Truncate first")));
  }
  if (request.k < 0 || request.q_top_k < 1) {
    return fail(absl::InvalidArgumentError(absl::StrCat("model drafter: request '",
                                                        request.request_id, "' has k = ", request.k,
                                                        ", q_top_k = ", request.q_top_k)));
  }
  if (absl::Status status = request.params.Validate(); !status.ok()) return fail(status);
  for (size_t i = held; i < request.context.size(); ++i) {
    if (request.context[i] < 0 || request.context[i] >= vocab_) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("model drafter: request '", request.request_id, "' context token ", i,
                       " is ", request.context[i], ", outside [0, ", vocab_, ")")));
    }
  }
  if (static_cast<int64_t>(request.context.size()) > max_tokens_) {
    return fail(absl::OutOfRangeError(
        absl::StrCat("model drafter: request '", request.request_id, "' context has ",
                     request.context.size(), " tokens, the draft cache holds ", max_tokens_)));
  }
  if (request.context.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("model drafter: request '", request.request_id, "' has an empty context")));
  }
  state.tokens.insert(state.tokens.end(), request.context.begin() + held, request.context.end());
  // Structured outputs: this drafter does not mask q with the grammar yet, so it
  // drafts nothing for such requests (the target then decides alone, masked);
  // unmasked drafts would be exact too (the target's masked p refuses what leaves
  // the grammar) but mostly wasted.
  const int k = request.params.grammar.has_value()
                    ? 0
                    : std::min<int64_t>(request.k,
                                        max_tokens_ - static_cast<int64_t>(state.tokens.size()));
  work.push_back(Work{&request, &state, held, k});
  // Trees: see the header for who keeps chains and why.
  const SamplingParams& params = request.params;
  if (request.tree_nodes >= 2 && k >= 1 && model_->RunsTrees() && request.alternatives == 0 &&
      !params.has_context_processors() && !params.guided()) {
    auto tree = std::make_shared<TreeGrowth>();
    tree->max_nodes = request.tree_nodes;
    tree->max_depth = std::min(k, request.tree_nodes);
    tree->frontier = {kTreeRoot};
    work.back().tree = std::move(tree);
  }
}

bool ModelDrafter::Choose(Work& w, const float* logits) {
  DraftRequest& r = *w.request;
  // The context is every token before the drafted position (held + drafted so far).
  RowContext context;
  context.tokens = w.state->tokens;
  context.prompt_length = r.prompt_length;
  context.allowed = w.state->allowed;
  absl::Status status = ProcessRow(r.params, context, absl::MakeConstSpan(logits, vocab_),
                                   absl::MakeSpan(probs_));
  absl::StatusOr<DraftChoice> choice =
      status.ok() ? ChooseDraftToken(r.mode, probs_, r.q_top_k, r.params.seed,
                                     static_cast<int64_t>(w.state->tokens.size()))
                  : absl::StatusOr<DraftChoice>(status);
  if (!choice.ok()) {
    Rollback(w);
    r.status = absl::Status(
        choice.status().code(),
        absl::StrCat("model drafter: request '", r.request_id, "': ", choice.status().message()));
    return false;
  }
  if (r.alternatives > 0) {
    absl::StatusOr<SparseDistribution> top = TopAlternatives(r, logits);
    if (!top.ok()) {
      Rollback(w);
      r.status = absl::Status(top.status().code(), absl::StrCat("model drafter: request '",
                                                                r.request_id, "': ",
                                                                top.status().message()));
      return false;
    }
    r.top.push_back(*std::move(top));
  }
  w.state->tokens.push_back(choice->token);
  r.tokens.push_back(choice->token);
  if (r.mode == VerifyMode::kRejection) r.q.push_back(std::move(choice->q));
  return true;
}

absl::StatusOr<SparseDistribution> ModelDrafter::TopAlternatives(const DraftRequest& r,
                                                                 const float* logits) {
  // Greedy parameters make probs_ one-hot; the guesses need the draft's ranking
  // beyond its argmax, so they come from the plain softmax (temperature 1).
  if (r.params.temperature > 0.0f) return TopQDistribution(probs_, r.alternatives);
  SamplingParams plain;
  plain.temperature = 1.0f;
  RETURN_IF_ERROR(
      LogitsToProbs(plain, absl::MakeConstSpan(logits, vocab_), absl::MakeSpan(plain_)));
  return TopQDistribution(plain_, r.alternatives);
}

void ModelDrafter::Rollback(Work& w) {
  w.state->tokens.resize(w.held_before);
  if (w.state->cache->length() > static_cast<int>(w.held_before)) {
    w.state->cache->Truncate(static_cast<int>(w.held_before))
        .IgnoreError();  // shrinking cannot fail
  }
  w.request->tokens.clear();
  w.request->parents.clear();
  w.request->q.clear();
  w.request->top.clear();
  w.tree = nullptr;
}

absl::Status ModelDrafter::CatchUp(std::vector<Work>& work, model::ForwardOutput* out) {
  std::vector<Work*> fed;
  std::vector<model::SequenceInput> inputs;
  for (Work& w : work) {
    if (!w.request->status.ok() || w.k != 0) continue;
    model::KvCache& cache = *w.state->cache;
    // All but the last token: the next Propose feeds that one for its logits.
    const int upto = static_cast<int>(w.state->tokens.size()) - 1;
    if (cache.length() >= upto) continue;
    fed.push_back(&w);
    inputs.push_back({&cache,
                      absl::MakeConstSpan(w.state->tokens).subspan(cache.length(),
                                                                   upto - cache.length()),
                      model::LogitsMode::kNone});
  }
  FitKvBudget(fed, inputs);
  if (inputs.empty()) return absl::OkStatus();
  const absl::Status status = model_->Forward(inputs, out);
  if (!status.ok()) {
    for (Work& w : work) Rollback(w);
  }
  return status;
}

model::SequenceInput ModelDrafter::TreeInput(Work& w) {
  TreeGrowth& tree = *w.tree;
  model::KvCache& cache = *w.state->cache;
  const int held = static_cast<int>(w.state->tokens.size());
  // Shrinking cannot fail. A growing tree is in every forward of its Propose, so
  // FitKvBudget never evicts it between levels: after level 1 the cache holds
  // the whole held sequence.
  if (tree.level == 1) {
    // As a chain's first step: the root's row (re-fed if cached, bitwise the same).
    if (cache.length() >= held) cache.Truncate(held - 1).IgnoreError();
    return {&cache, absl::MakeConstSpan(w.state->tokens).subspan(cache.length()),
            model::LogitsMode::kLast};
  }
  // The tree's root is the last held token, at the cache's end.
  if (cache.length() > held - 1) cache.Truncate(held - 1).IgnoreError();
  model::SequenceInput input{&cache, tree.fed_tokens, model::LogitsMode::kAll};
  input.tree_parents = tree.fed_parents;
  return input;
}

absl::Status ModelDrafter::RankCandidates(const DraftRequest& r, const RowContext& row,
                                          const float* logits, int64_t position, int count,
                                          TreeGrowth& tree, NodeCandidates& out) {
  const absl::Span<const float> logits_row = absl::MakeConstSpan(logits, vocab_);
  RETURN_IF_ERROR(ProcessRow(r.params, row, logits_row, absl::MakeSpan(probs_)));
  out.tokens.clear();
  out.probs.clear();
  out.q_row = -1;
  switch (r.mode) {
    case VerifyMode::kRejection: {
      // The children are drawn after the plan (SampleSiblings); the plan ranks q.
      ASSIGN_OR_RETURN(SparseDistribution q, TopQDistribution(probs_, r.q_top_k));
      out.probs.assign(q.probs.begin(), q.probs.begin() + std::min<size_t>(q.probs.size(), count));
      out.q_row = static_cast<int32_t>(tree.q_rows.size());
      tree.q_rows.push_back(std::move(q));
      return absl::OkStatus();
    }
    case VerifyMode::kGreedy: {
      ASSIGN_OR_RETURN(DraftChoice chain,
                       ChooseDraftToken(r.mode, probs_, r.q_top_k, r.params.seed, position));
      // A one-hot q (temperature 0) ranks nothing beyond its argmax: rank by the
      // unshaped softmax, as the alternatives do.
      absl::Span<const float> ranking = probs_;
      if (r.params.temperature <= 0.0f) {
        SamplingParams plain;
        plain.temperature = 1.0f;
        RETURN_IF_ERROR(ProcessRow(plain, row, logits_row, absl::MakeSpan(plain_)));
        ranking = plain_;
      }
      ASSIGN_OR_RETURN(SparseDistribution top, TopQDistribution(ranking, count));
      out.tokens.push_back(chain.token);
      out.probs.push_back(ranking[chain.token]);
      for (size_t j = 0; j < top.token_ids.size() && out.tokens.size() < static_cast<size_t>(count);
           ++j) {
        if (top.token_ids[j] == chain.token || ranking[top.token_ids[j]] <= 0.0f) continue;
        out.tokens.push_back(top.token_ids[j]);
        out.probs.push_back(ranking[top.token_ids[j]]);
      }
      return absl::OkStatus();
    }
    case VerifyMode::kCoupled: {
      ASSIGN_OR_RETURN(DraftChoice chain,
                       ChooseDraftToken(r.mode, probs_, r.q_top_k, r.params.seed, position));
      // The next highest perturbed scores log q + g of the target's own noise.
      std::vector<std::pair<double, int32_t>> scored;
      for (int32_t v = 0; v < vocab_; ++v) {
        if (probs_[v] <= 0.0f || v == chain.token) continue;
        scored.emplace_back(
            std::log(static_cast<double>(probs_[v])) +
                kernels::GumbelNoise(r.params.seed, position, v),
            v);
      }
      const size_t others = std::min<size_t>(scored.size(), std::max(0, count - 1));
      std::partial_sort(scored.begin(), scored.begin() + others, scored.end(),
                        [](const auto& a, const auto& b) {
                          return a.first > b.first || (a.first == b.first && a.second < b.second);
                        });
      out.tokens.push_back(chain.token);
      out.probs.push_back(probs_[chain.token]);
      for (size_t j = 0; j < others; ++j) {
        out.tokens.push_back(scored[j].second);
        out.probs.push_back(probs_[scored[j].second]);
      }
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown verify mode");
}

bool ModelDrafter::GrowTree(Work& w, const model::ForwardOutput& out, int s) {
  TreeGrowth& tree = *w.tree;
  DraftRequest& r = *w.request;
  const std::vector<int32_t>& held = w.state->tokens;
  const int64_t position = static_cast<int64_t>(held.size()) + tree.level - 1;
  const int nodes_left = tree.max_nodes - tree.nodes();
  const size_t width = tree.frontier.size();
  std::vector<NodeCandidates> candidates(width);
  std::vector<FrontierNode> plan(width);
  std::vector<int32_t> context;
  for (size_t f = 0; f < width; ++f) {
    const int32_t node = tree.frontier[f];
    const int row =
        node == kTreeRoot
            ? 0
            : 1 + static_cast<int>(std::lower_bound(tree.fed.begin(), tree.fed.end(), node) -
                                   tree.fed.begin());
    context.assign(held.begin(), held.end());
    const std::vector<int32_t> path = tree.PathTokens(node);
    context.insert(context.end(), path.begin(), path.end());
    RowContext row_context;
    row_context.tokens = context;
    row_context.prompt_length = r.prompt_length;
    row_context.allowed = w.state->allowed;
    const absl::Status status = RankCandidates(r, row_context, out.Row(s, row), position,
                                               std::max(1, nodes_left), tree, candidates[f]);
    if (!status.ok()) {
      Rollback(w);
      r.status = absl::Status(status.code(), absl::StrCat("model drafter: request '",
                                                          r.request_id, "': ", status.message()));
      return false;
    }
    plan[f].value = node == kTreeRoot ? 1.0 : tree.values[node];
    plan[f].ranked = candidates[f].probs;
    plan[f].first_path = node == tree.first_path_end;
  }
  const std::vector<int> children = PlanLevel(plan, tree.level, tree.max_depth, nodes_left);

  const int32_t level_begin = tree.nodes();
  int32_t first_path_next = kTreeRoot;
  for (size_t f = 0; f < width; ++f) {
    if (children[f] == 0) continue;
    const int32_t node = tree.frontier[f];
    const NodeCandidates& c = candidates[f];
    std::vector<int32_t> drawn;
    std::vector<double> probs;
    if (c.q_row >= 0) {
      const SparseDistribution& q = tree.q_rows[c.q_row];
      drawn = SampleSiblings(q, children[f], r.params.seed, position);
      for (int32_t x : drawn) probs.push_back(q.ProbabilityOf(x));
    } else {
      const size_t m = std::min<size_t>(children[f], c.tokens.size());
      drawn.assign(c.tokens.begin(), c.tokens.begin() + m);
      probs.assign(c.probs.begin(), c.probs.begin() + m);
    }
    for (size_t j = 0; j < drawn.size(); ++j) {
      if (j == 0 && node == tree.first_path_end) first_path_next = tree.nodes();
      tree.tokens.push_back(drawn[j]);
      tree.parents.push_back(node);
      tree.values.push_back(plan[f].value * probs[j]);
      tree.q_row.push_back(c.q_row);
    }
  }
  tree.first_path_end = first_path_next;
  tree.frontier.clear();
  if (first_path_next == kTreeRoot || tree.level == tree.max_depth ||
      tree.nodes() >= tree.max_nodes) {
    return true;  // grown
  }

  // The next level expands the first-path node and the new nodes of highest value,
  // as many as the budget left beside the first path's remaining nodes can feed.
  std::vector<int32_t> others;
  for (int32_t v = level_begin; v < tree.nodes(); ++v) {
    if (v != first_path_next) others.push_back(v);
  }
  std::stable_sort(others.begin(), others.end(),
                   [&](int32_t a, int32_t b) { return tree.values[a] > tree.values[b]; });
  const int spare = tree.max_nodes - tree.nodes() - (tree.max_depth - tree.level);
  others.resize(std::clamp<size_t>(spare, 0, others.size()));
  tree.frontier = {first_path_next};
  tree.frontier.insert(tree.frontier.end(), others.begin(), others.end());
  std::sort(tree.frontier.begin(), tree.frontier.end());

  // The forward feeds the frontier and its ancestors, parents first.
  std::vector<bool> feed(tree.nodes(), false);
  for (int32_t v : tree.frontier) {
    for (int32_t a = v; a != kTreeRoot && !feed[a]; a = tree.parents[a]) feed[a] = true;
  }
  tree.fed.clear();
  for (int32_t v = 0; v < tree.nodes(); ++v) {
    if (feed[v]) tree.fed.push_back(v);
  }
  tree.fed_tokens = {held.back()};
  tree.fed_parents = {-1};
  for (int32_t v : tree.fed) {
    tree.fed_tokens.push_back(tree.tokens[v]);
    const int32_t parent = tree.parents[v];
    tree.fed_parents.push_back(
        parent == kTreeRoot
            ? 0
            : 1 + static_cast<int32_t>(
                      std::lower_bound(tree.fed.begin(), tree.fed.end(), parent) -
                      tree.fed.begin()));
  }
  ++tree.level;
  return true;
}

absl::Status ModelDrafter::FinishTree(Work& w) {
  TreeGrowth& tree = *w.tree;
  DraftRequest& r = *w.request;
  RequestState& state = *w.state;
  const int held = static_cast<int>(state.tokens.size());
  // Depth-first (pre-)order; a node's children were created in draw order.
  std::vector<std::vector<int32_t>> children(tree.nodes() + 1);  // [0]: the root's
  for (int32_t v = 0; v < tree.nodes(); ++v) children[tree.parents[v] + 1].push_back(v);
  std::vector<int32_t> index(tree.nodes(), kTreeRoot);
  std::vector<int32_t> stack(children[0].rbegin(), children[0].rend());
  while (!stack.empty()) {
    const int32_t v = stack.back();
    stack.pop_back();
    index[v] = static_cast<int32_t>(r.tokens.size());
    r.tokens.push_back(tree.tokens[v]);
    r.parents.push_back(tree.parents[v] == kTreeRoot ? kTreeRoot : index[tree.parents[v]]);
    if (r.mode == VerifyMode::kRejection) r.q.push_back(tree.q_rows[tree.q_row[v]]);
    stack.insert(stack.end(), children[v + 1].rbegin(), children[v + 1].rend());
  }
  // The request now holds context + the first path; its cache keeps the root and
  // the first-path nodes the last forward fed (all but the path's last node).
  std::vector<int32_t> path;
  for (int32_t v = tree.first_path_end; v != kTreeRoot; v = tree.parents[v]) path.push_back(v);
  std::reverse(path.begin(), path.end());
  if (tree.level >= 2) {
    std::vector<int32_t> keep = {0};
    for (int32_t v : path) {
      auto it = std::lower_bound(tree.fed.begin(), tree.fed.end(), v);
      if (it == tree.fed.end() || *it != v) break;
      keep.push_back(1 + static_cast<int32_t>(it - tree.fed.begin()));
    }
    RETURN_IF_ERROR(state.cache->KeepPath(held - 1, keep));
  }
  for (int32_t v : path) state.tokens.push_back(tree.tokens[v]);
  return absl::OkStatus();
}

absl::Status ModelDrafter::Propose(absl::Span<DraftRequest> batch) {
  std::vector<Work> work;
  absl::flat_hash_map<std::string, bool> seen;
  for (DraftRequest& request : batch) Admit(request, seen, work);
  model::ForwardOutput out;
  RETURN_IF_ERROR(CatchUp(work, &out));
  while (true) {
    std::vector<Work*> active;
    std::vector<model::SequenceInput> inputs;
    for (Work& w : work) {
      if (!w.request->status.ok()) continue;
      if (w.tree != nullptr) {  // grown while it has a frontier
        if (w.tree->frontier.empty()) continue;
        active.push_back(&w);
        inputs.push_back(TreeInput(w));
        continue;
      }
      if (static_cast<int>(w.request->tokens.size()) >= w.k) continue;
      model::KvCache& cache = *w.state->cache;
      // The last held token must be fed to get the next position's logits; if the
      // cache already holds it, recompute it (bitwise identical: batch-invariant).
      if (cache.length() >= static_cast<int>(w.state->tokens.size())) {
        RETURN_IF_ERROR(cache.Truncate(static_cast<int>(w.state->tokens.size()) - 1));
      }
      active.push_back(&w);
      inputs.push_back({&cache, absl::MakeConstSpan(w.state->tokens).subspan(cache.length()),
                        model::LogitsMode::kLast});
    }
    FitKvBudget(active, inputs);
    if (active.empty()) return absl::OkStatus();
    const absl::Status status = model_->Forward(inputs, &out);
    kv_budget_.ObserveUsed();
    if (!status.ok()) {
      for (Work& w : work) Rollback(w);
      return status;
    }
    for (size_t i = 0; i < active.size(); ++i) {
      Work& w = *active[i];
      if (w.tree == nullptr) {
        Choose(w, out.Row(static_cast<int>(i), 0));
      } else if (GrowTree(w, out, static_cast<int>(i)) && w.tree->frontier.empty()) {
        if (absl::Status status = FinishTree(w); !status.ok()) {
          for (Work& each : work) Rollback(each);
          return status;
        }
      }
    }
  }
}

}  // namespace splitspec::spec
