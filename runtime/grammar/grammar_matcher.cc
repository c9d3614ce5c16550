#include "runtime/grammar/grammar_matcher.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/grammar/grammar_internal.h"

namespace splitspec::grammar {
namespace {

using grammar_internal::CallXgrammar;

// A one-dimensional int32 DLTensor over `words` (what xgrammar's bitmask calls take).
struct BitmaskTensor {
  explicit BitmaskTensor(absl::Span<int32_t> words) : shape(static_cast<int64_t>(words.size())) {
    tensor.data = words.data();
    tensor.device = DLDevice{kDLCPU, 0};
    tensor.ndim = 1;
    tensor.dtype = xgrammar::GetBitmaskDLType();
    tensor.shape = &shape;
    tensor.strides = nullptr;
    tensor.byte_offset = 0;
  }
  int64_t shape;
  DLTensor tensor;
};

}  // namespace

struct GrammarMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)),
      // Constructing a matcher from a compiled grammar only copies handles and sets up the
      // initial state; it does not throw for a grammar that compiled.
      impl_(std::make_unique<Impl>(Impl{xgrammar::GrammarMatcher(grammar_->impl().compiled)})),
      scratch_bitmask_(bitmask_words()) {}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

absl::Status GrammarMatcher::FillNextTokenBitmask(absl::Span<int32_t> bitmask) {
  if (static_cast<int64_t>(bitmask.size()) != bitmask_words()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar bitmask has ", bitmask.size(),
                                                   " words, expected ", bitmask_words()));
  }
  if (IsTerminated()) {
    // xgrammar refuses to fill after termination; nothing may follow the end of generation.
    std::fill(bitmask.begin(), bitmask.end(), 0);
    return absl::OkStatus();
  }
  BitmaskTensor tensor(bitmask);
  return CallXgrammar("grammar bitmask", [&] {
           return impl_->matcher.FillNextTokenBitmask(&tensor.tensor);
         })
      .status();
}

absl::Status GrammarMatcher::MaskLogits(absl::Span<float> logits) {
  if (static_cast<int64_t>(logits.size()) != vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar mask: logits row has ", logits.size(),
                                                   " entries, expected ", vocab_size()));
  }
  RETURN_IF_ERROR(FillNextTokenBitmask(absl::MakeSpan(scratch_bitmask_)));
  ApplyBitmaskToLogits(scratch_bitmask_, logits);
  return absl::OkStatus();
}

bool GrammarMatcher::AcceptToken(model::TokenId token) {
  if (token < 0 || token >= vocab_size() || IsTerminated()) return false;
  absl::StatusOr<bool> accepted =
      CallXgrammar("grammar accept", [&] { return impl_->matcher.AcceptToken(token); });
  if (!accepted.ok() || !*accepted) return false;
  ++num_accepted_tokens_;
  return true;
}

absl::Status GrammarMatcher::Rollback(int num_tokens) {
  if (num_tokens < 0 || num_tokens > num_accepted_tokens_) {
    return absl::OutOfRangeError(absl::StrCat("grammar rollback of ", num_tokens,
                                              " tokens; ", num_accepted_tokens_, " accepted"));
  }
  if (num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(CallXgrammar("grammar rollback", [&] {
                    impl_->matcher.Rollback(num_tokens);
                    return true;
                  }).status());
  num_accepted_tokens_ -= num_tokens;
  return absl::OkStatus();
}

bool GrammarMatcher::IsTerminated() const { return impl_->matcher.IsTerminated(); }
bool GrammarMatcher::IsCompleted() const { return impl_->matcher.IsCompleted(); }

absl::StatusOr<int> GrammarMatcher::FillDraftBitmasks(absl::Span<const model::TokenId> draft,
                                                      absl::Span<int32_t> bitmasks) {
  const size_t words = bitmask_words();
  if (bitmasks.size() < (draft.size() + 1) * words) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar draft bitmasks: ", bitmasks.size(), " words for ", draft.size(),
                     " drafted tokens, expected at least ", (draft.size() + 1) * words));
  }
  int valid = 0;
  absl::Status status = FillNextTokenBitmask(bitmasks.subspan(0, words));
  while (status.ok() && valid < static_cast<int>(draft.size())) {
    const model::TokenId token = draft[valid];
    // Checked against the row just filled, so a draft that leaves the grammar is cut without
    // asking xgrammar (which logs every token it rejects).
    if (token < 0 || token >= vocab_size() ||
        !BitmaskAllows(bitmasks.subspan(valid * words, words), token) || !AcceptToken(token)) {
      break;
    }
    ++valid;
    status = FillNextTokenBitmask(bitmasks.subspan(valid * words, words));
  }
  // Back to the state before the call, whether or not a fill failed.
  absl::Status rolled_back = Rollback(valid);
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(rolled_back);
  return valid;
}

void ApplyBitmaskToLogits(absl::Span<const int32_t> bitmask, absl::Span<float> logits) {
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < logits.size(); ++t) {
    if (!BitmaskAllows(bitmask, static_cast<model::TokenId>(t))) logits[t] = kMinusInfinity;
  }
}

}  // namespace splitspec::grammar
