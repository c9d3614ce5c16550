#include "runtime/spec/model_drafter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/spec/vocabulary_check.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::spec {

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
  request.parents.clear();  // a chain (drafter.h: model drafters propose no trees yet)
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
  w.request->q.clear();
  w.request->top.clear();
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
      if (!w.request->status.ok() || static_cast<int>(w.request->tokens.size()) >= w.k) continue;
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
    for (size_t i = 0; i < active.size(); ++i) Choose(*active[i], out.Row(static_cast<int>(i), 0));
  }
}

}  // namespace splitspec::spec
