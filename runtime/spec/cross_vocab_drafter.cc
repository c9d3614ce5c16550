#include "runtime/spec/cross_vocab_drafter.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/utf8.h"
#include "runtime/model/transformer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::spec {
namespace {

// The length of `text` without an incomplete UTF-8 character at its end (bytes
// that may still become one when more text comes).
size_t CompleteUtf8Prefix(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t pos = n - back;
    if ((static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) continue;  // continuation byte
    size_t length = 0;
    return ScanUtf8Char(text.substr(pos), &length) == Utf8Scan::kIncomplete ? pos : n;
  }
  return n;
}

// The bytes a held target token adds to the text: control tokens as their text
// (chat markers mean something to the draft too), the target's BOS as nothing
// (the draft has its own).
std::string_view TargetBytes(const model::Tokenizer& target, int32_t id) {
  if (id == target.bos_id()) return {};
  absl::StatusOr<std::string_view> piece = target.Piece(id, /*render_special=*/true);
  return piece.ok() ? *piece : std::string_view();
}

// The text a drafted token stands for under string mapping, or nullopt for a
// token that ends the draft's text (control, unknown, unused: not text).
// The token of each single byte in a vocabulary (kNoToken where none).
ByteTokens MakeByteTokens(const model::Tokenizer& tokenizer) {
  ByteTokens tokens;
  tokens.fill(model::kNoToken);
  for (model::TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::optional<std::string_view> bytes = IntersectionBytes(tokenizer, id);
    if (!bytes.has_value() || bytes->size() != 1) continue;
    int32_t& slot = tokens[static_cast<unsigned char>((*bytes)[0])];
    // The normal token before a byte token (what Encode produces for valid text).
    if (slot == model::kNoToken || (tokenizer.token_type(slot) != model::TokenType::kNormal &&
                                    tokenizer.token_type(id) == model::TokenType::kNormal)) {
      slot = id;
    }
  }
  return tokens;
}

std::optional<std::string_view> DraftedBytes(const model::Tokenizer& draft, int32_t id) {
  if (id < 0 || id >= draft.vocab_size()) return std::nullopt;
  const model::TokenType type = draft.token_type(id);
  if (type != model::TokenType::kNormal && type != model::TokenType::kByte &&
      type != model::TokenType::kUserDefined) {
    return std::nullopt;
  }
  absl::StatusOr<std::string_view> piece = draft.Piece(id);
  if (!piece.ok()) return std::nullopt;
  return *piece;
}

// `tokenizer`'s tokens of `fragment`, a continuation of earlier text (no BOS, no
// space prefix), and the byte end of each in the fragment. Each byte that starts no
// well-formed UTF-8 character becomes its own byte token (`byte_tokens`), so the
// tokens spell the bytes exactly where Encode would put U+FFFD; without one, the
// ends stay monotone inside the fragment and the last ends at its end.
void EncodeContinuation(const model::Tokenizer& tokenizer, const ByteTokens& byte_tokens,
                        std::string_view fragment, bool parse_special, std::vector<int32_t>* ids,
                        std::vector<size_t>* ends) {
  ids->clear();
  ends->clear();
  const model::EncodeOptions options{
      .add_special = false, .parse_special = parse_special, .space_prefix = false};
  size_t run = 0;  // start of the well-formed run not encoded yet
  auto flush = [&](size_t upto) {
    if (upto == run) return;
    const std::vector<int32_t> encoded =
        tokenizer.Encode(fragment.substr(run, upto - run), options);
    size_t end = run;
    for (int32_t id : encoded) {
      absl::StatusOr<std::string_view> piece = tokenizer.Piece(id, /*render_special=*/true);
      end = std::min(upto, end + (piece.ok() ? piece->size() : 0));
      ids->push_back(id);
      ends->push_back(end);
    }
    if (!encoded.empty()) ends->back() = upto;
  };
  size_t pos = 0;
  while (pos < fragment.size()) {
    size_t length = 0;
    if (ScanUtf8Char(fragment.substr(pos), &length) != Utf8Scan::kInvalid) {
      pos += length;
      continue;
    }
    const int32_t byte_token = byte_tokens[static_cast<unsigned char>(fragment[pos])];
    if (byte_token == model::kNoToken) {  // Encode's U+FFFD, as well as it goes
      pos += 1;
      continue;
    }
    flush(pos);
    ids->push_back(byte_token);
    ends->push_back(pos + 1);
    pos += 1;
    run = pos;
  }
  flush(fragment.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> CrossVocabDrafter::Create(
    std::unique_ptr<model::Transformer> draft, model::Tokenizer draft_tokenizer,
    const model::Tokenizer* target_tokenizer, const CrossVocabDrafterOptions& options) {
  if (target_tokenizer == nullptr) {
    return absl::InvalidArgumentError("cross-vocabulary drafter: no target tokenizer");
  }
  if (options.look_behind < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cross-vocabulary drafter: look_behind must be >= 1, got ", options.look_behind));
  }
  const int draft_logits = draft->config().vocab_size;
  ASSIGN_OR_RETURN(VocabularyMap map,
                   VocabularyMap::Build(*target_tokenizer, draft_tokenizer, draft_logits));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDrafter> inner,
                   ModelDrafter::Create(std::move(draft), draft_tokenizer, draft_tokenizer,
                                        draft_logits, options.model));
  return std::unique_ptr<CrossVocabDrafter>(new CrossVocabDrafter(
      std::move(inner), std::move(draft_tokenizer), target_tokenizer, std::move(map), options));
}

absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> CrossVocabDrafter::Load(
    const std::string& path, const model::Tokenizer* target_tokenizer,
    const CrossVocabDrafterOptions& options) {
  model::TransformerOptions transformer_options;
  transformer_options.threads = options.model.threads;
  transformer_options.device = options.model.device;
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> draft,
                   model::Transformer::Load(path, transformer_options));
  absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(draft->file());
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat("draft model ", path, ": ", tokenizer.status().message()));
  }
  absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> drafter =
      Create(std::move(draft), *std::move(tokenizer), target_tokenizer, options);
  if (!drafter.ok()) {
    return absl::Status(drafter.status().code(),
                        absl::StrCat("draft model ", path, ": ", drafter.status().message()));
  }
  return drafter;
}

CrossVocabDrafter::CrossVocabDrafter(std::unique_ptr<ModelDrafter> inner,
                                     model::Tokenizer draft_tokenizer,
                                     const model::Tokenizer* target_tokenizer, VocabularyMap map,
                                     const CrossVocabDrafterOptions& options)
    : inner_(std::move(inner)),
      draft_tokenizer_(std::move(draft_tokenizer)),
      target_tokenizer_(target_tokenizer),
      map_(std::move(map)),
      options_(options),
      draft_bytes_(MakeByteTokens(draft_tokenizer_)),
      target_bytes_(MakeByteTokens(*target_tokenizer_)) {}

std::string CrossVocabDrafter::Describe() const {
  std::string modes;
  switch (options_.mapping) {
    case VocabMapping::kAuto:
      modes = "intersection under rejection verification, string under greedy and coupled";
      break;
    case VocabMapping::kIntersection:
      modes = "intersection under every verification mode";
      break;
    case VocabMapping::kString:
      modes = "string under every verification mode";
      break;
  }
  return absl::StrCat("draft vocabulary of ", map_.draft_size(),
                      " tokens differs from the target's ", map_.target_size(), ": ",
                      map_.shared_draft_tokens(), " draft tokens shared; vocab mapping ",
                      VocabMappingName(options_.mapping), " (", modes, ")");
}

std::vector<int32_t> CrossVocabDrafter::DraftTokens(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? std::vector<int32_t>() : it->second.draft.ids;
}

void CrossVocabDrafter::AppendTarget(RequestState& state, absl::Span<const int32_t> ids) const {
  for (int32_t id : ids) {
    state.text.append(TargetBytes(*target_tokenizer_, id));
    state.target.Append(id, state.text.size());
  }
}

void CrossVocabDrafter::CutTarget(RequestState& state, size_t length) const {
  state.target.Resize(length);
  state.text.resize(state.target.covered());
  size_t keep = state.draft.ids.size();
  while (keep > state.draft_fixed && state.draft.ends[keep - 1] > state.text.size()) --keep;
  state.draft.Resize(keep);
}

void CrossVocabDrafter::SyncDraft(RequestState& state) const {
  const size_t limit = CompleteUtf8Prefix(state.text);
  Spans& draft = state.draft;
  if (draft.covered() >= limit) return;
  const size_t look_behind = static_cast<size_t>(options_.look_behind);
  const size_t from = draft.ids.size() > state.draft_fixed + look_behind
                          ? draft.ids.size() - look_behind
                          : state.draft_fixed;
  const size_t start = draft.start(from);
  std::vector<int32_t> ids;
  std::vector<size_t> ends;
  EncodeContinuation(draft_tokenizer_, draft_bytes_,
                     std::string_view(state.text).substr(start, limit - start),
                     /*parse_special=*/true, &ids, &ends);
  size_t common = 0;
  while (common < ids.size() && from + common < draft.ids.size() &&
         draft.ids[from + common] == ids[common] &&
         draft.ends[from + common] == start + ends[common]) {
    ++common;
  }
  draft.Resize(from + common);
  for (size_t i = common; i < ids.size(); ++i) draft.Append(ids[i], start + ends[i]);
}

absl::Status CrossVocabDrafter::SyncInner(const std::string& request_id, RequestState& state) {
  const std::vector<int32_t>& want = state.draft.ids;
  if (!state.inner_started) {
    if (want.empty()) return absl::OkStatus();  // nothing to condition on yet
    RETURN_IF_ERROR(inner_->Start(request_id, want));
    state.inner_tokens = want;
    state.inner_started = true;
    return absl::OkStatus();
  }
  size_t common = 0;
  const size_t n = std::min(want.size(), state.inner_tokens.size());
  while (common < n && want[common] == state.inner_tokens[common]) ++common;
  if (common < state.inner_tokens.size()) {
    RETURN_IF_ERROR(inner_->Truncate(request_id, static_cast<int64_t>(common)));
    state.inner_tokens.resize(common);
  }
  return absl::OkStatus();
}

absl::Status CrossVocabDrafter::Start(const std::string& request_id,
                                      absl::Span<const int32_t> tokens) {
  if (requests_.contains(request_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cross-vocabulary drafter: request '", request_id, "' already started"));
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cross-vocabulary drafter: request '", request_id, "' has no tokens"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= target_tokenizer_->vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cross-vocabulary drafter: request '", request_id, "' token ", i, " is ", tokens[i],
          ", outside the target's vocabulary [0, ", target_tokenizer_->vocab_size(), ")"));
    }
  }
  RequestState state;
  if (draft_tokenizer_.adds_bos() && draft_tokenizer_.bos_id() != model::kNoToken) {
    state.draft.Append(draft_tokenizer_.bos_id(), 0);
    state.draft_fixed = 1;
  }
  AppendTarget(state, tokens);
  SyncDraft(state);
  RETURN_IF_ERROR(SyncInner(request_id, state));
  requests_.emplace(request_id, std::move(state));
  return absl::OkStatus();
}

absl::Status CrossVocabDrafter::Truncate(const std::string& request_id, int64_t length) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    return absl::NotFoundError(
        absl::StrCat("cross-vocabulary drafter: unknown request '", request_id, "'"));
  }
  RequestState& state = it->second;
  if (length < 0 || length > static_cast<int64_t>(state.target.ids.size())) {
    return absl::OutOfRangeError(absl::StrCat("cross-vocabulary drafter: cannot truncate request '",
                                              request_id, "' to ", length, " tokens, it holds ",
                                              state.target.ids.size()));
  }
  // The inner drafter is cut lazily, at the next Propose (SyncInner).
  CutTarget(state, static_cast<size_t>(length));
  return absl::OkStatus();
}

void CrossVocabDrafter::Release(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  if (it->second.inner_started) inner_->Release(request_id);
  requests_.erase(it);
}

absl::Status CrossVocabDrafter::PrepareInner(Work& w) {
  const DraftRequest& r = *w.request;
  RequestState& state = *w.state;
  DraftRequest& inner = w.inner;
  inner.request_id = r.request_id;
  inner.context = state.draft.ids;
  // A text ending inside a character the draft's tokens do not cover yet drafts
  // nothing until the rest comes.
  const bool waiting = state.draft.covered() < state.text.size();
  inner.k = waiting ? 0 : r.k;
  inner.mode = r.mode;
  inner.params = r.params;
  inner.params.logit_bias.clear();
  for (const auto& [id, bias] : r.params.logit_bias) {
    const int32_t draft_id = map_.ToDraft(id);
    if (draft_id != model::kNoToken) inner.params.logit_bias.emplace_back(draft_id, bias);
  }
  std::sort(inner.params.logit_bias.begin(), inner.params.logit_bias.end());
  inner.params.logit_bias.erase(
      std::unique(inner.params.logit_bias.begin(), inner.params.logit_bias.end(),
                  [](const auto& a, const auto& b) { return a.first == b.first; }),
      inner.params.logit_bias.end());
  // The prompt is the draft tokens inside the target prompt's bytes.
  const size_t prompt =
      std::min(static_cast<size_t>(std::max(r.prompt_length, 0)), state.target.ids.size());
  const size_t prompt_bytes = prompt == 0 ? 0 : state.target.ends[prompt - 1];
  inner.prompt_length = static_cast<int>(
      std::upper_bound(state.draft.ends.begin(), state.draft.ends.end(), prompt_bytes) -
      state.draft.ends.begin());
  inner.q_top_k = r.q_top_k;
  inner.alternatives = w.mapping == VocabMapping::kIntersection ? r.alternatives : 0;
  return inner_->RestrictTokens(r.request_id, w.mapping == VocabMapping::kIntersection
                                                  ? map_.draft_mask()
                                                  : absl::Span<const uint32_t>());
}

void CrossVocabDrafter::FinishIntersection(Work& w) {
  DraftRequest& r = *w.request;
  RequestState& state = *w.state;
  const DraftRequest& inner = w.inner;
  for (size_t i = 0; i < inner.tokens.size(); ++i) {
    const int32_t target_id = map_.ToTarget(inner.tokens[i]);
    if (target_id == model::kNoToken) break;  // the mask keeps this from happening
    if (r.mode == VerifyMode::kRejection) {
      absl::StatusOr<SparseDistribution> q = map_.MapToTarget(inner.q[i]);
      if (!q.ok()) break;
      r.q.push_back(*std::move(q));
    }
    if (r.alternatives > 0 && i < inner.top.size()) {
      SparseDistribution top;
      float total = 0.0f;
      for (size_t j = 0; j < inner.top[i].token_ids.size(); ++j) {
        const int32_t id = map_.ToTarget(inner.top[i].token_ids[j]);
        if (id == model::kNoToken ||
            std::find(top.token_ids.begin(), top.token_ids.end(), id) != top.token_ids.end()) {
          continue;
        }
        top.token_ids.push_back(id);
        top.probs.push_back(inner.top[i].probs[j]);
        total += inner.top[i].probs[j];
      }
      if (top.token_ids.empty() || total <= 0.0f) {
        top = SparseDistribution::OneHot(target_id);
      } else {
        for (float& p : top.probs) p /= total;
      }
      r.top.push_back(std::move(top));
    }
    r.tokens.push_back(target_id);
    AppendTarget(state, {target_id});
    // The draft token stands for exactly the target token's bytes.
    state.draft.Append(inner.tokens[i], state.text.size());
  }
}

void CrossVocabDrafter::FinishString(Work& w) {
  DraftRequest& r = *w.request;
  RequestState& state = *w.state;
  const DraftRequest& inner = w.inner;
  // The draft's text, up to a token that is not text (its end of turn).
  std::string drafted;
  std::vector<size_t> drafted_ends;
  for (int32_t id : inner.tokens) {
    const std::optional<std::string_view> bytes = DraftedBytes(draft_tokenizer_, id);
    if (!bytes.has_value()) break;
    drafted.append(*bytes);
    drafted_ends.push_back(drafted.size());
  }
  const size_t base = state.text.size();
  // Re-tokenize from a look-behind window of held target tokens (not across a
  // special token, whose text would tokenize as characters), so a draft text that
  // merges with the held tail tokenizes as the target would.
  const size_t n = state.target.ids.size();
  size_t from = n;
  while (from > 0 && n - from < static_cast<size_t>(options_.look_behind) &&
         !target_tokenizer_->IsSpecial(state.target.ids[from - 1]) &&
         state.target.ids[from - 1] != target_tokenizer_->bos_id()) {
    --from;
  }
  const size_t start = state.target.start(from);
  std::string joined = state.text.substr(start) + drafted;
  joined.resize(CompleteUtf8Prefix(joined));
  if (joined.size() <= base - start) return;
  std::vector<int32_t> ids;
  std::vector<size_t> ends;
  EncodeContinuation(*target_tokenizer_, target_bytes_, joined, /*parse_special=*/false, &ids,
                     &ends);
  size_t first = n - from;  // the first proposed token in ids
  bool held_match = ids.size() > first;
  for (size_t i = 0; held_match && i < first; ++i) {
    held_match =
        ids[i] == state.target.ids[from + i] && start + ends[i] == state.target.ends[from + i];
  }
  size_t offset = start;  // ids' bytes start at text offset `offset`
  if (!held_match) {
    // The draft's text merges with the held tail in a way the held tokens do not
    // spell: propose the target's tokens of the drafted text alone.
    const std::string_view alone = std::string_view(joined).substr(base - start);
    EncodeContinuation(*target_tokenizer_, target_bytes_, alone, /*parse_special=*/false, &ids,
                       &ends);
    first = 0;
    offset = base;
  }
  // Propose tokens whose bytes are the drafted text's, at most k of them.
  size_t proposed_end = base;
  for (size_t i = first; i < ids.size() && r.tokens.size() < static_cast<size_t>(r.k); ++i) {
    absl::StatusOr<std::string_view> piece = target_tokenizer_->Piece(ids[i]);
    const size_t token_start = offset + (i == 0 ? 0 : ends[i - 1]);
    const size_t token_end = offset + ends[i];
    if (!piece.ok() || token_start != proposed_end || piece->size() != token_end - token_start ||
        drafted.compare(token_start - base, piece->size(), *piece) != 0) {
      break;
    }
    r.tokens.push_back(ids[i]);
    if (r.mode == VerifyMode::kRejection) r.q.push_back(SparseDistribution::OneHot(ids[i]));
    AppendTarget(state, {ids[i]});
    proposed_end = token_end;
  }
  // The draft's drafted tokens inside the proposed text stay as the draft drafted
  // them; the rest is cut (the inner drafter at the next Propose).
  for (size_t i = 0; i < drafted_ends.size() && base + drafted_ends[i] <= state.text.size(); ++i) {
    state.draft.Append(inner.tokens[i], base + drafted_ends[i]);
  }
}

absl::Status CrossVocabDrafter::Propose(absl::Span<DraftRequest> batch) {
  std::vector<Work> work;
  work.reserve(batch.size());
  absl::flat_hash_set<std::string> seen;
  for (DraftRequest& r : batch) {
    r.tokens.clear();
    r.parents.clear();  // a chain: no trees from model drafters yet
    r.q.clear();
    r.top.clear();
    r.status = absl::OkStatus();
    auto it = requests_.find(r.request_id);
    if (it == requests_.end()) {
      r.status = absl::FailedPreconditionError(
          absl::StrCat("cross-vocabulary drafter: request '", r.request_id, "' was not started"));
      continue;
    }
    if (!seen.insert(r.request_id).second) {
      r.status = absl::InvalidArgumentError(absl::StrCat(
          "cross-vocabulary drafter: request '", r.request_id, "' appears twice in one batch"));
      continue;
    }
    RequestState& state = it->second;
    const size_t held = state.target.ids.size();
    if (r.context.size() < held) {
      r.status = absl::FailedPreconditionError(absl::StrCat(
          "cross-vocabulary drafter: request '", r.request_id, "' context has ", r.context.size(),
          " tokens but the drafter holds ", held, "; call Truncate first"));
      continue;
    }
    bool in_vocabulary = true;
    for (size_t i = held; i < r.context.size() && in_vocabulary; ++i) {
      if (r.context[i] < 0 || r.context[i] >= target_tokenizer_->vocab_size()) {
        r.status = absl::InvalidArgumentError(
            absl::StrCat("cross-vocabulary drafter: request '", r.request_id, "' context token ", i,
                         " is ", r.context[i], ", outside the target's vocabulary [0, ",
                         target_tokenizer_->vocab_size(), ")"));
        in_vocabulary = false;
      }
    }
    if (!in_vocabulary) continue;
    AppendTarget(state, r.context.subspan(held));
    SyncDraft(state);
    Work w{&r, &state, held, ResolveVocabMapping(options_.mapping, r.mode), {}};
    absl::Status status = SyncInner(r.request_id, state);
    if (status.ok() && state.draft.ids.empty()) continue;  // nothing to draft from yet
    if (status.ok()) status = PrepareInner(w);
    if (!status.ok()) {
      r.status = std::move(status);
      CutTarget(state, held);
      continue;
    }
    work.push_back(std::move(w));
  }
  if (work.empty()) return absl::OkStatus();
  std::vector<DraftRequest> inner_batch;
  inner_batch.reserve(work.size());
  for (Work& w : work) inner_batch.push_back(std::move(w.inner));
  const absl::Status status = inner_->Propose(absl::MakeSpan(inner_batch));
  for (size_t i = 0; i < work.size(); ++i) {
    Work& w = work[i];
    w.inner = std::move(inner_batch[i]);
    if (!status.ok() || !w.inner.status.ok()) {
      // The inner drafter rolled the request back to what it held before.
      if (status.ok()) w.request->status = w.inner.status;
      CutTarget(*w.state, w.held_before);
      continue;
    }
    // The inner drafter now holds its context and its drafts.
    w.state->inner_tokens.assign(w.inner.context.begin(), w.inner.context.end());
    w.state->inner_tokens.insert(w.state->inner_tokens.end(), w.inner.tokens.begin(),
                                 w.inner.tokens.end());
    if (w.mapping == VocabMapping::kIntersection) {
      FinishIntersection(w);
    } else {
      FinishString(w);
    }
  }
  return status;
}

}  // namespace splitspec::spec
