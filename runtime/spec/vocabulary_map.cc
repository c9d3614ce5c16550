#include "runtime/spec/vocabulary_map.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

// Which of two ids sharing a byte string the other vocabulary maps to: the normal
// token before the byte token, then the lower id.
bool Preferred(const model::Tokenizer& tokenizer, model::TokenId a, model::TokenId b) {
  const bool a_normal = tokenizer.token_type(a) == model::TokenType::kNormal;
  const bool b_normal = tokenizer.token_type(b) == model::TokenType::kNormal;
  if (a_normal != b_normal) return a_normal;
  return a < b;
}

// bytes -> the preferred id of `tokenizer` with those bytes.
absl::flat_hash_map<std::string_view, model::TokenId> ByBytes(const model::Tokenizer& tokenizer) {
  absl::flat_hash_map<std::string_view, model::TokenId> by_bytes;
  by_bytes.reserve(tokenizer.vocab_size());
  for (model::TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::optional<std::string_view> bytes = IntersectionBytes(tokenizer, id);
    if (!bytes.has_value()) continue;
    auto [it, inserted] = by_bytes.emplace(*bytes, id);
    if (!inserted && Preferred(tokenizer, id, it->second)) it->second = id;
  }
  return by_bytes;
}

}  // namespace

std::optional<std::string_view> IntersectionBytes(const model::Tokenizer& tokenizer,
                                                  model::TokenId id) {
  const model::TokenType type = tokenizer.token_type(id);
  if (type != model::TokenType::kNormal && type != model::TokenType::kByte) return std::nullopt;
  absl::StatusOr<std::string_view> piece = tokenizer.Piece(id);
  if (!piece.ok() || piece->empty()) return std::nullopt;
  return *piece;
}

absl::StatusOr<VocabularyMap> VocabularyMap::Build(const model::Tokenizer& target,
                                                   const model::Tokenizer& draft,
                                                   int draft_logits) {
  const int draft_size = std::max(draft_logits, draft.vocab_size());
  VocabularyMap map;
  map.to_target_.assign(draft_size, model::kNoToken);
  map.to_draft_.assign(target.vocab_size(), model::kNoToken);
  map.draft_mask_.assign((draft_size + 31) / 32, 0u);
  const absl::flat_hash_map<std::string_view, model::TokenId> target_by_bytes = ByBytes(target);
  const absl::flat_hash_map<std::string_view, model::TokenId> draft_by_bytes = ByBytes(draft);
  for (model::TokenId id = 0; id < draft.vocab_size(); ++id) {
    const std::optional<std::string_view> bytes = IntersectionBytes(draft, id);
    if (!bytes.has_value()) continue;
    auto it = target_by_bytes.find(*bytes);
    if (it == target_by_bytes.end()) continue;
    map.to_target_[id] = it->second;
    map.draft_mask_[id / 32] |= 1u << (id % 32);
    ++map.shared_draft_tokens_;
  }
  for (model::TokenId id = 0; id < target.vocab_size(); ++id) {
    const std::optional<std::string_view> bytes = IntersectionBytes(target, id);
    if (!bytes.has_value()) continue;
    auto it = draft_by_bytes.find(*bytes);
    if (it != draft_by_bytes.end()) map.to_draft_[id] = it->second;
  }
  if (map.shared_draft_tokens_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the draft vocabulary (", draft.vocab_size(), " tokens) and the target's (",
                     target.vocab_size(), " tokens) share no token"));
  }
  return map;
}

absl::StatusOr<SparseDistribution> VocabularyMap::MapToTarget(const SparseDistribution& q) const {
  absl::flat_hash_map<int32_t, float> mass;
  for (size_t i = 0; i < q.token_ids.size(); ++i) {
    const int32_t target_id = ToTarget(q.token_ids[i]);
    if (target_id == model::kNoToken) {
      return absl::InvalidArgumentError(absl::StrCat("draft token ", q.token_ids[i], " (entry ", i,
                                                     " of q, probability ", q.probs[i],
                                                     ") has no token in the target's vocabulary"));
    }
    mass[target_id] += q.probs[i];
  }
  std::vector<std::pair<int32_t, float>> entries(mass.begin(), mass.end());
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  SparseDistribution out;
  out.token_ids.reserve(entries.size());
  out.probs.reserve(entries.size());
  for (const auto& [id, p] : entries) {
    out.token_ids.push_back(id);
    out.probs.push_back(p);
  }
  return out;
}

}  // namespace splitspec::spec
