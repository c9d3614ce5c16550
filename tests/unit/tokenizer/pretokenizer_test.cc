#include "runtime/tokenizer/pretokenizer.h"

#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Words = std::vector<std::string>;

Words SplitWith(std::string_view name, std::string_view text) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::FromName(name);
  EXPECT_TRUE(pre.ok()) << pre.status();
  return pre->Split(text);
}

TEST(PreTokenizerTest, Gpt2SplitsContractionsWordsAndWhitespaceRuns) {
  EXPECT_THAT(SplitWith("gpt2", "Hello world! I'm 42  x\n\ny"),
              ElementsAre("Hello", " world", "!", " I", "'m", " 42", " ", " x", "\n", "\n", "y"));
}

TEST(PreTokenizerTest, Gpt2KeepsTrailingWhitespaceTogether) {
  EXPECT_THAT(SplitWith("gpt-2", "end   "), ElementsAre("end", "   "));
  EXPECT_THAT(SplitWith("gpt2", "a ,b"), ElementsAre("a", " ,", "b"));
}

TEST(PreTokenizerTest, SmolLMIsolatesEveryDigit) {
  EXPECT_THAT(SplitWith("smollm", "Hello world 42"), ElementsAre("Hello", " world", " ", "4", "2"));
  EXPECT_THAT(SplitWith("smollm", "x=123.5"), ElementsAre("x", "=", "1", "2", "3", ".", "5"));
  // Non-ASCII digits (\p{N}) too: Arabic-Indic three, one-half.
  EXPECT_THAT(SplitWith("smollm", "a\u0663\u00BD"), ElementsAre("a", "\u0663", "\u00BD"));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndNewlines) {
  EXPECT_THAT(
      SplitWith("llama-bpe", "Hello world! I'M 12345  x\n\n y"),
      ElementsAre("Hello", " world", "!", " I", "'M", " ", "123", "45", " ", " x", "\n\n", " y"));
  EXPECT_THAT(SplitWith("llama3", "foo...\n\nbar (word"),
              ElementsAre("foo", "...\n\n", "bar", " (", "word"));
}

TEST(PreTokenizerTest, Llama3AttachesOnePunctuationMarkToAWord) {
  // [^\r\n\p{L}\p{N}]?\p{L}+ takes one leading non-letter along.
  EXPECT_THAT(SplitWith("llama3", "x.y_z"), ElementsAre("x", ".y", "_z"));
}

TEST(PreTokenizerTest, Qwen2SplitsDigitsOneByOne) {
  EXPECT_THAT(SplitWith("qwen2", "I'M 12345  x"),
              ElementsAre("I", "'M", " ", "1", "2", "3", "4", "5", " ", " x"));
}

TEST(PreTokenizerTest, CjkAndEmojiStayWhole) {
  EXPECT_THAT(SplitWith("smollm", "你好，世界 👋🌍"), ElementsAre("你好", "，", "世界", " 👋🌍"));
}

TEST(PreTokenizerTest, WordsConcatenateToTheInput) {
  const std::string text = "def f(x):\n\treturn x**2  # ok\r\n\u00A0\u3000 naïve Straße 3.14 🇺🇸";
  for (std::string_view name : {"gpt2", "llama3", "qwen2", "smollm"}) {
    EXPECT_EQ(absl::StrJoin(SplitWith(name, text), ""), text) << name;
  }
}

TEST(PreTokenizerTest, MalformedUtf8BecomesReplacementCharacters) {
  EXPECT_THAT(SplitWith("gpt2", "a\xFF"), ElementsAre("a", "\uFFFD"));
}

TEST(PreTokenizerTest, UnknownNameIsRefusedByName) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::FromName("deepseek-coder");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pre.status().message(), HasSubstr("'deepseek-coder'"));
  EXPECT_THAT(pre.status().message(), HasSubstr("smollm"));
}

TEST(PreTokenizerTest, EmptyTextHasNoWords) { EXPECT_TRUE(SplitWith("smollm", "").empty()); }

}  // namespace
}  // namespace splitspec::model
