#include "coordinator/http/openai_logprobs.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace splitspec::coordinator::http {
namespace {

// vLLM's stand-in for -inf, which JSON cannot write.
constexpr float kMinLogprob = -9999.0f;

float Finite(float logprob) { return std::isfinite(logprob) ? logprob : kMinLogprob; }

void WriteBytes(absl::string_view text, JsonWriter& w) {
  w.BeginArray();
  for (unsigned char byte : text) w.Int(byte);
  w.EndArray();
}

void WriteChat(const std::vector<TokenLogprobText>& entries, JsonWriter& w) {
  w.BeginObject().Key("content").BeginArray();
  for (const TokenLogprobText& entry : entries) {
    w.BeginObject();
    w.Key("token").String(entry.token);
    w.Key("logprob").Float(Finite(entry.logprob));
    w.Key("bytes");
    WriteBytes(entry.token, w);
    w.Key("top_logprobs").BeginArray();
    for (const auto& [text, logprob] : entry.top) {
      w.BeginObject().Key("token").String(text).Key("logprob").Float(Finite(logprob));
      w.Key("bytes");
      WriteBytes(text, w);
      w.EndObject();
    }
    w.EndArray().EndObject();
  }
  w.EndArray().Key("refusal").Null().EndObject();
}

void WriteCompletion(const std::vector<TokenLogprobText>& entries, int text_offset, JsonWriter& w) {
  w.BeginObject();
  w.Key("tokens").BeginArray();
  for (const TokenLogprobText& entry : entries) w.String(entry.token);
  w.EndArray().Key("token_logprobs").BeginArray();
  for (const TokenLogprobText& entry : entries) w.Float(Finite(entry.logprob));
  w.EndArray().Key("top_logprobs").BeginArray();
  for (const TokenLogprobText& entry : entries) {
    w.BeginObject();
    absl::flat_hash_set<std::string> written;  // a JSON object names a key once
    for (const auto& [text, logprob] : entry.top) {
      if (written.insert(text).second) w.Key(text).Float(Finite(logprob));
    }
    w.EndObject();
  }
  w.EndArray().Key("text_offset").BeginArray();
  for (const TokenLogprobText& entry : entries) {
    w.Int(text_offset);
    text_offset += CharacterCount(entry.token);
  }
  w.EndArray().EndObject();
}

}  // namespace

absl::StatusOr<std::vector<TokenLogprobText>> LogprobTexts(
    const model::Tokenizer& tokenizer,
    const google::protobuf::RepeatedPtrField<proto::TokenLogprob>& entries, int count) {
  std::vector<TokenLogprobText> texts;
  count = std::min(count, entries.size());
  texts.reserve(count);
  for (int e = 0; e < count; ++e) {
    const proto::TokenLogprob& entry = entries[e];
    TokenLogprobText text;
    absl::StatusOr<std::string_view> piece =
        tokenizer.Piece(entry.token(), /*render_special=*/true);
    if (!piece.ok()) return piece.status();
    text.token = std::string(*piece);
    text.logprob = entry.logprob();
    for (int i = 0; i < entry.top_ids_size() && i < entry.top_logprobs_size(); ++i) {
      absl::StatusOr<std::string_view> top =
          tokenizer.Piece(entry.top_ids(i), /*render_special=*/true);
      if (!top.ok()) return top.status();
      text.top.emplace_back(std::string(*top), entry.top_logprobs(i));
    }
    texts.push_back(std::move(text));
  }
  return texts;
}

int CharacterCount(absl::string_view text) {
  int count = 0;
  for (unsigned char byte : text) count += (byte & 0xC0) != 0x80;
  return count;
}

void WriteLogprobs(CompletionRequest::Kind kind, const std::vector<TokenLogprobText>& entries,
                   int text_offset, JsonWriter& w) {
  if (kind == CompletionRequest::kChat) {
    WriteChat(entries, w);
  } else {
    WriteCompletion(entries, text_offset, w);
  }
}

}  // namespace splitspec::coordinator::http
