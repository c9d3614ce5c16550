// Helpers for the grammar tests: constrained sampling from random logits, and an independent
// JSON parser (protobuf's) to check what came out.
#ifndef SPLITSPEC_TESTS_UNIT_GRAMMAR_GRAMMAR_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_GRAMMAR_GRAMMAR_TEST_UTIL_H_

#include <cctype>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
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

// An RFC 8259 syntax check, independent of xgrammar and of protobuf (whose parser also refuses
// numbers beyond double's range, which JSON allows). Bytes >= 0x80 in strings are not checked.
class JsonSyntax {
 public:
  // Whether `text` is one JSON value, with optional surrounding whitespace.
  static bool IsValue(const std::string& text) {
    JsonSyntax parser(text);
    return parser.Value() && (parser.SkipSpace(), parser.pos_ == text.size());
  }
  // Whether `text` is one JSON object.
  static bool IsObject(const std::string& text) {
    JsonSyntax parser(text);
    parser.SkipSpace();
    return parser.Peek() == '{' && IsValue(text);
  }

 private:
  explicit JsonSyntax(const std::string& text) : text_(text) {}
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Eat(char c) { return Peek() == c ? (++pos_, true) : false; }
  void SkipSpace() {
    while (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r') ++pos_;
  }
  bool Literal(const char* word) {
    for (; *word != '\0'; ++word) {
      if (!Eat(*word)) return false;
    }
    return true;
  }
  bool Digits() {
    const size_t start = pos_;
    while (Peek() >= '0' && Peek() <= '9') ++pos_;
    return pos_ > start;
  }
  bool Number() {
    Eat('-');
    if (!Eat('0') && !Digits()) return false;
    if (Eat('.') && !Digits()) return false;
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!Digits()) return false;
    }
    return true;
  }
  bool String() {
    if (!Eat('"')) return false;
    while (pos_ < text_.size()) {
      const auto c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') continue;
      const char e = Peek();
      ++pos_;
      if (e == 'u') {
        for (int i = 0; i < 4; ++i, ++pos_) {
          if (!std::isxdigit(static_cast<unsigned char>(Peek()))) return false;
        }
      } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
        return false;
      }
    }
    return false;
  }
  template <typename Item>
  bool Sequence(char open, char close, Item item) {
    if (!Eat(open)) return false;
    SkipSpace();
    if (Eat(close)) return true;
    do {
      SkipSpace();
      if (!item()) return false;
      SkipSpace();
    } while (Eat(','));
    return Eat(close);
  }
  bool Value() {
    SkipSpace();
    switch (Peek()) {
      case '{':
        return Sequence('{', '}', [this] {
          if (!String()) return false;
          SkipSpace();
          return Eat(':') && Value();
        });
      case '[':
        return Sequence('[', ']', [this] { return Value(); });
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace splitspec::grammar::testing

#endif  // SPLITSPEC_TESTS_UNIT_GRAMMAR_GRAMMAR_TEST_UTIL_H_
