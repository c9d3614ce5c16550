// Incremental detokenization for streaming: token ids go in one at a time and
// only complete UTF-8 characters come out.
//
//   StreamingDetokenizer detok(&tokenizer);
//   for (TokenId id : generated) {
//     ASSIGN_OR_RETURN(std::string text, detok.Push(id));
//     Send(text);                    // always valid UTF-8, possibly empty
//   }
//   Send(detok.Finish());            // what is still buffered
//
// A token may end inside a multi-byte character (byte-level BPE splits emoji
// and CJK across tokens); those bytes are held back until the character is
// complete. Bytes that can never form a valid character (a stray continuation
// byte, an impossible lead byte, a cut-off sequence followed by something
// else) are replaced by U+FFFD, one per byte, so the output is always valid
// UTF-8. For ids whose bytes are valid UTF-8, the concatenated output equals
// Tokenizer::Decode of all ids with the same options.
//
// Thread safety: none; one detokenizer per stream. The tokenizer must outlive it.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_DETOKENIZER_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_DETOKENIZER_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::model {

class StreamingDetokenizer {
 public:
  // REQUIRES: tokenizer != nullptr and outlives this object.
  explicit StreamingDetokenizer(const Tokenizer* tokenizer, DecodeOptions options = {});

  // Adds one token; returns the text that became complete (maybe empty).
  // Errors: InvalidArgument naming an id out of range; the state is then
  // unchanged.
  absl::StatusOr<std::string> Push(TokenId id);

  // Returns what is buffered, an unfinished character as U+FFFD per byte, and
  // resets the detokenizer for a new stream.
  std::string Finish();

  // Bytes held back (an unfinished character).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  // Moves the complete characters of pending_ to *out; with `final`, also
  // replaces an unfinished tail by U+FFFD.
  void Drain(bool final, std::string* out);

  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  bool strip_space_;
  std::string pending_;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_DETOKENIZER_H_
