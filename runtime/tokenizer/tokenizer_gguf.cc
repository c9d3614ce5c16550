#include "runtime/tokenizer/tokenizer_gguf.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/tokenizer/tokenizer_internal.h"

namespace splitspec::model {
namespace {

using tokenizer_internal::AV;

absl::Status Missing(std::string_view key, std::string_view why) {
  return absl::NotFoundError(absl::StrCat("GGUF has no '", AV(key), "' ", AV(why)));
}

// Reads an optional token id; leaves *id unchanged when the key is absent.
absl::Status ReadTokenId(const GgufFile& file, std::string_view key, TokenId* id) {
  if (!file.HasKey(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(int64_t value, file.GetInteger(key));
  if (value < 0 || value > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", AV(key), "' = ", value, " is not a token id"));
  }
  *id = static_cast<TokenId>(value);
  return absl::OkStatus();
}

absl::Status ReadOptionalBool(const GgufFile& file, std::string_view key,
                              std::optional<bool>* out) {
  if (!file.HasKey(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(bool value, file.GetBool(key));
  *out = value;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadStrings(const GgufFile& file, std::string_view key) {
  ASSIGN_OR_RETURN(absl::Span<const std::string_view> views, file.GetStringArray(key));
  return std::vector<std::string>(views.begin(), views.end());
}

absl::Status ReadTokenTypes(const GgufFile& file, TokenizerVocab* vocab) {
  constexpr std::string_view kKey = "tokenizer.ggml.token_type";
  if (!file.HasKey(kKey)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<int64_t> types, file.GetIntegerArray(kKey));
  vocab->token_types.reserve(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] < 0 || types[i] > static_cast<int64_t>(TokenType::kByte)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", AV(kKey), "'[", i, "] = ", types[i], " is not a token type (0..6)"));
    }
    vocab->token_types.push_back(static_cast<TokenType>(types[i]));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerVocab> LoadTokenizerVocabFromGguf(const GgufFile& file) {
  TokenizerVocab vocab;
  if (!file.HasKey("tokenizer.ggml.model")) {
    return Missing("tokenizer.ggml.model", "(the model carries no tokenizer)");
  }
  ASSIGN_OR_RETURN(std::string_view model, file.GetString("tokenizer.ggml.model"));
  vocab.model = std::string(model);
  if (file.HasKey("tokenizer.ggml.pre")) {
    ASSIGN_OR_RETURN(std::string_view pre, file.GetString("tokenizer.ggml.pre"));
    vocab.pre = std::string(pre);
  } else if (vocab.model == "gpt2") {
    return Missing("tokenizer.ggml.pre", "(a BPE vocabulary needs its pre-tokenizer named)");
  }
  if (!file.HasKey("tokenizer.ggml.tokens")) return Missing("tokenizer.ggml.tokens", "");
  ASSIGN_OR_RETURN(vocab.tokens, ReadStrings(file, "tokenizer.ggml.tokens"));
  if (file.HasKey("tokenizer.ggml.scores")) {
    ASSIGN_OR_RETURN(vocab.scores, file.GetFloat32Array("tokenizer.ggml.scores"));
  }
  RETURN_IF_ERROR(ReadTokenTypes(file, &vocab));
  if (vocab.model == "gpt2") {
    if (!file.HasKey("tokenizer.ggml.merges")) return Missing("tokenizer.ggml.merges", "");
    ASSIGN_OR_RETURN(vocab.merges, ReadStrings(file, "tokenizer.ggml.merges"));
  }
  if (vocab.model == "llama") {
    vocab.unk_id = 0;
    vocab.bos_id = 1;
    vocab.eos_id = 2;
  }
  RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.bos_token_id", &vocab.bos_id));
  RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.eos_token_id", &vocab.eos_id));
  RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.unknown_token_id", &vocab.unk_id));
  RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.padding_token_id", &vocab.pad_id));
  RETURN_IF_ERROR(ReadTokenId(file, "tokenizer.ggml.eot_token_id", &vocab.eot_id));
  RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_bos_token", &vocab.add_bos));
  RETURN_IF_ERROR(ReadOptionalBool(file, "tokenizer.ggml.add_eos_token", &vocab.add_eos));
  RETURN_IF_ERROR(
      ReadOptionalBool(file, "tokenizer.ggml.add_space_prefix", &vocab.add_space_prefix));
  if (file.HasKey("tokenizer.chat_template")) {
    ASSIGN_OR_RETURN(std::string_view tmpl, file.GetString("tokenizer.chat_template"));
    vocab.chat_template = std::string(tmpl);
  }
  RETURN_IF_ERROR(vocab.Validate());
  return vocab;
}

absl::StatusOr<Tokenizer> LoadTokenizerFromGguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(TokenizerVocab vocab, LoadTokenizerVocabFromGguf(file));
  return Tokenizer::Create(std::move(vocab));
}

}  // namespace splitspec::model
