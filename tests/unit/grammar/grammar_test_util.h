// Helpers for the grammar tests: constrained sampling from random logits, and independent JSON
// checks of what came out.
#ifndef SPLITSPEC_TESTS_UNIT_GRAMMAR_GRAMMAR_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_GRAMMAR_GRAMMAR_TEST_UTIL_H_

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "coordinator/http/json_guard.h"
#include "gtest/gtest.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::grammar::testing {

struct SampledText {
  std::vector<model::TokenId> ids;  // end-of-generation token excluded
  std::string text;                 // the bytes of `ids`
  bool terminated = false;          // ended with an end-of-generation token
};

// Samples up to `max_tokens` tokens from random logits masked by `matcher` (advancing it),
// until an end-of-generation token. Tokens whose bytes close something ('"', '}', ']') and
// end-of-generation tokens get +`closing_boost`, so random text ends in reasonable time.
inline SampledText SampleConstrained(GrammarMatcher& matcher, const model::Tokenizer& tokenizer,
                                     std::mt19937& rng, int max_tokens,
                                     float closing_boost = 3.0f) {
  SampledText out;
  std::uniform_real_distribution<float> noise(0.0f, 1.0f);
  std::vector<float> logits(matcher.vocab_size());
  for (int step = 0; step < max_tokens; ++step) {
    for (model::TokenId t = 0; t < matcher.vocab_size(); ++t) {
      logits[t] = noise(rng);
      if (t >= tokenizer.vocab_size()) continue;
      const std::string piece(*tokenizer.Piece(t));
      if (tokenizer.IsEndOfGeneration(t) || piece.find_first_of("\"}]") != std::string::npos) {
        logits[t] += closing_boost;
      }
    }
    EXPECT_TRUE(matcher.MaskLogits(absl::MakeSpan(logits)).ok());
    // Gumbel-max over the masked row: a sample of softmax(logits).
    model::TokenId best = -1;
    float best_score = -INFINITY;
    for (model::TokenId t = 0; t < matcher.vocab_size(); ++t) {
      if (std::isinf(logits[t])) continue;
      const float u = std::max(noise(rng), 1e-12f);
      const float score = logits[t] - std::log(-std::log(u));
      if (score > best_score) {
        best_score = score;
        best = t;
      }
    }
    EXPECT_GE(best, 0) << "the grammar allows no token after '" << out.text << "'";
    if (best < 0) return out;
    EXPECT_TRUE(matcher.AcceptToken(best)) << "a token from the mask was refused: " << best;
    if (tokenizer.IsEndOfGeneration(best)) {
      out.terminated = true;
      return out;
    }
    out.ids.push_back(best);
    out.text += std::string(*tokenizer.Piece(best));
  }
  return out;
}

// `json` parsed by protobuf's JSON parser (RFC 8259), or an error.
inline absl::StatusOr<google::protobuf::Value> ParseJson(const std::string& json) {
  google::protobuf::Value value;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &value);
  if (!status.ok()) return absl::InvalidArgumentError(status.ToString());
  return value;
}

// The bitmask of a fresh matcher fed `tokens` (each must be accepted).
inline std::vector<int32_t> MaskAfter(const std::shared_ptr<const CompiledGrammar>& grammar,
                               const std::vector<model::TokenId>& tokens) {
  GrammarMatcher matcher(grammar);
  for (model::TokenId t : tokens) EXPECT_TRUE(matcher.AcceptToken(t)) << t;
  std::vector<int32_t> mask(matcher.bitmask_words());
  EXPECT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
  return mask;
}

// A random draft of up to `k` tokens: mostly tokens the grammar allows at that point (so
// drafts go deep), sometimes any token (so some leave the grammar).
inline std::vector<model::TokenId> RandomDraft(const std::shared_ptr<const CompiledGrammar>& grammar,
                                 const std::vector<model::TokenId>& committed, int k,
                                 std::mt19937& rng) {
  GrammarMatcher matcher(grammar);
  for (model::TokenId t : committed) EXPECT_TRUE(matcher.AcceptToken(t));
  std::vector<model::TokenId> draft;
  std::vector<int32_t> mask(matcher.bitmask_words());
  for (int i = 0; i < k; ++i) {
    EXPECT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
    std::vector<model::TokenId> allowed;
    for (model::TokenId t = 0; t < matcher.vocab_size(); ++t) {
      if (BitmaskAllows(mask, t)) allowed.push_back(t);
    }
    model::TokenId t;
    if (allowed.empty() || rng() % 8 == 0) {
      t = static_cast<model::TokenId>(rng() % matcher.vocab_size());
    } else {
      t = allowed[rng() % allowed.size()];
    }
    draft.push_back(t);
    if (!matcher.AcceptToken(t)) break;  // the rest of the draft is never looked at
  }
  return draft;
}

// Whether `text` is RFC 8259 JSON (the front door's strict check, coordinator/http/json_guard.h,
// independent of xgrammar; protobuf's parser is lax about raw control characters in strings).
inline bool IsJson(const std::string& text) {
  return coordinator::http::CheckJsonText(text).ok();
}

// Whether `text` is one JSON object.
inline bool IsJsonObject(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text[first] == '{' && IsJson(text);
}

}  // namespace splitspec::grammar::testing

#endif  // SPLITSPEC_TESTS_UNIT_GRAMMAR_GRAMMAR_TEST_UTIL_H_
