// CompletionText: the generated text of one request, built token by token:
// incremental detokenization (never half a UTF-8 character) plus stop strings.
//
//   CompletionText text(&tokenizer, {"\n\n"});
//   for (int32_t id : new_tokens) {
//     ASSIGN_OR_RETURN(std::string delta, text.Push(id));
//     Emit(delta);
//     if (text.stopped()) break;       // cancel the request: a stop string was generated
//   }
//   Emit(text.Finish());               // at the end of the stream
//
// Stop strings: the output is cut right before the first occurrence of any stop
// string (the stop string itself is not emitted). Text that could be the start
// of a stop string is held back until it is known not to be, so a stop string
// split across tokens is still found and never leaks to the client.
//
// Thread safety: none; one per request. The tokenizer must outlive it.
#ifndef SPLITSPEC_COORDINATOR_HTTP_COMPLETION_TEXT_H_
#define SPLITSPEC_COORDINATOR_HTTP_COMPLETION_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::coordinator::http {

class CompletionText {
 public:
  // REQUIRES: tokenizer outlives this object; no stop string is empty.
  CompletionText(const model::Tokenizer* tokenizer, std::vector<std::string> stop);

  // Adds one generated token; returns the text that became safe to emit
  // (maybe empty). After stopped(), tokens are ignored and "" is returned.
  // Errors: InvalidArgument naming a token id outside the vocabulary (the
  // state is then unchanged).
  absl::StatusOr<std::string> Push(int32_t token);

  // The rest of the text (held-back bytes, an unfinished character as U+FFFD);
  // "" after a stop. Call once, at the end.
  std::string Finish();

  bool stopped() const { return stopped_; }
  // Tokens pushed up to and including the one that completed a stop string.
  int tokens() const { return tokens_; }
  // Everything returned by Push and Finish so far.
  const std::string& emitted() const { return emitted_; }

 private:
  // Moves what can no longer start a stop string from pending_ to the result.
  std::string Release();

  model::StreamingDetokenizer detokenizer_;
  std::vector<std::string> stop_;
  std::string pending_;  // detokenized, not yet emitted (may begin a stop string)
  std::string emitted_;
  bool stopped_ = false;
  int tokens_ = 0;
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_COMPLETION_TEXT_H_
