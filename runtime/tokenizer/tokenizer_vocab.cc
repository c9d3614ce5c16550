#include "runtime/tokenizer/tokenizer_vocab.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::model {
namespace {

absl::Status CheckId(const char* field, TokenId id, size_t num_tokens) {
  if (id == kNoToken) return absl::OkStatus();
  if (id < 0 || static_cast<size_t>(id) >= num_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", id, " out of range [0, ", num_tokens, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckParallel(const char* field, size_t size, size_t num_tokens) {
  if (size != 0 && size != num_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", size, " entries but there are ", num_tokens, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TokenizerVocab::Validate() const {
  if (model != "gpt2" && model != "llama") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported tokenizer model '", model,
        "' (tokenizer.ggml.model); supported: gpt2 (byte-level BPE), llama (SentencePiece)"));
  }
  if (tokens.empty()) return absl::InvalidArgumentError("tokenizer has no tokens");
  const size_t n = tokens.size();
  if (n > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("too many tokens: ", n));
  }
  RETURN_IF_ERROR(CheckParallel("scores", scores.size(), n));
  RETURN_IF_ERROR(CheckParallel("token_types", token_types.size(), n));
  for (size_t i = 0; i < token_types.size(); ++i) {
    const int32_t t = static_cast<int32_t>(token_types[i]);
    if (t < 0 || t > static_cast<int32_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", i, " ('", tokens[i], "') has unknown token type ", t));
    }
  }
  RETURN_IF_ERROR(CheckId("bos_id", bos_id, n));
  RETURN_IF_ERROR(CheckId("eos_id", eos_id, n));
  RETURN_IF_ERROR(CheckId("unk_id", unk_id, n));
  RETURN_IF_ERROR(CheckId("pad_id", pad_id, n));
  RETURN_IF_ERROR(CheckId("eot_id", eot_id, n));
  return absl::OkStatus();
}

}  // namespace splitspec::model
