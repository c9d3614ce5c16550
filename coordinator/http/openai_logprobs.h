// Log probabilities in OpenAI's shapes, for the front door's replies
// (the entries come from the target's rows: runtime/spec/token_logprobs.h).
//
//   ASSIGN_OR_RETURN(std::vector<TokenLogprobText> entries,
//                    LogprobTexts(tokenizer, stream.logprobs(), stream.logprobs_size()));
//   JsonWriter w;  ...  w.Key("logprobs");
//   WriteLogprobs(CompletionRequest::kChat, entries, /*text_offset=*/0, w);
//
// Chat:        {"content": [{"token", "logprob", "bytes": [..], "top_logprobs":
//               [{"token", "logprob", "bytes"}, ...]}, ...], "refusal": null}
// Completions: {"tokens": [..], "token_logprobs": [..], "top_logprobs": [{token: logprob}],
//               "text_offset": [..]}; text_offset counts Unicode characters (code
//               points) from the start of the choice's text (after an echoed prompt,
//               whose characters come first), a token ending inside a character
//               counting its lead byte only; two alternatives with the same text
//               keep the first (the likelier) in the object, as OpenAI's.
// A token's text is its bytes (Tokenizer::Piece, special tokens rendered); in JSON strings bytes
// that are not UTF-8 become U+FFFD, and "bytes" (chat) keeps them exact. A log-probability of -inf
// (a token the processed row excludes) is written -9999.0, as vLLM does; every log-probability is
// written exactly (JsonWriter::Float: the shortest decimal of the float).
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_OPENAI_LOGPROBS_H_
#define SPLITSPEC_COORDINATOR_HTTP_OPENAI_LOGPROBS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/http/json_writer.h"
#include "coordinator/http/openai_request.h"
#include "google/protobuf/repeated_field.h"
#include "proto/splitspec.pb.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::coordinator::http {

// One committed token's entry with its text and its alternatives' texts.
struct TokenLogprobText {
  std::string token;  // the token's bytes
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // by decreasing log-probability
};

// The first `count` entries with their tokens' texts. Errors: InvalidArgument
// naming an id outside the tokenizer's vocabulary.
absl::StatusOr<std::vector<TokenLogprobText>> LogprobTexts(
    const model::Tokenizer& tokenizer,
    const google::protobuf::RepeatedPtrField<proto::TokenLogprob>& entries, int count);

// Characters (code points) of `text`: its bytes that are not UTF-8 continuation bytes.
int CharacterCount(absl::string_view text);

// Writes the logprobs object of one choice (or of one streamed chunk's tokens)
// as a value; `text_offset` is the offset of entries[0]'s text (completions).
void WriteLogprobs(CompletionRequest::Kind kind, const std::vector<TokenLogprobText>& entries,
                   int text_offset, JsonWriter& w);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_OPENAI_LOGPROBS_H_
