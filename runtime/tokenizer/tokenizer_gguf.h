// Builds a Tokenizer from the `tokenizer.*` metadata of a GGUF file.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
//   ASSIGN_OR_RETURN(Tokenizer tok, LoadTokenizerFromGguf(*file));
//
// Keys read (all under "tokenizer."):
//   ggml.model (required), ggml.pre (required for "gpt2"), ggml.tokens
//   (required), ggml.scores, ggml.token_type, ggml.merges (required for
//   "gpt2"), ggml.{bos,eos,unknown,padding,eot}_token_id,
//   ggml.add_bos_token, ggml.add_eos_token, ggml.add_space_prefix,
//   chat_template.
// A "llama" vocabulary without special ids gets llama.cpp's defaults
// (unk 0, bos 1, eos 2).
//
// Thread safety: reads the (immutable) file only.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_GGUF_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_GGUF_H_

#include "absl/status/statusor.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::model {

// Errors: NotFound naming a missing required key; InvalidArgument naming a key
// of the wrong type, or from TokenizerVocab::Validate.
absl::StatusOr<TokenizerVocab> LoadTokenizerVocabFromGguf(const GgufFile& file);

// LoadTokenizerVocabFromGguf + Tokenizer::Create (same errors, plus an
// unsupported model or pre-tokenizer, named).
absl::StatusOr<Tokenizer> LoadTokenizerFromGguf(const GgufFile& file);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_GGUF_H_
