#include "runtime/config/toml_parser.h"

#include <cmath>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::config {
namespace {

using ::testing::HasSubstr;

TomlTable ParseOk(const std::string& text) {
  absl::StatusOr<TomlTable> t = ParseToml(text, "t.toml");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : TomlTable{};
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<TomlTable> t = ParseToml(text, "t.toml");
  EXPECT_FALSE(t.ok()) << "parsed: " << text;
  return t.ok() ? "" : std::string(t.status().message());
}

TEST(TomlParserTest, ParsesScalarValues) {
  TomlTable t = ParseOk(
      "s = \"a\\tb \\\"q\\\" \\u00e9\\U0001F600\"\n"
      "lit = 'C:\\path'\n"
      "i = -1_000\n"
      "big = 9223372036854775807\n"
      "f = 6.25e-1\n"
      "g = -inf\n"
      "yes = true\n"
      "no = false  # trailing comment\n");
  EXPECT_EQ(t.FindValue("s")->string_value, "a\tb \"q\" \xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(t.FindValue("lit")->string_value, "C:\\path");
  EXPECT_EQ(t.FindValue("i")->kind, TomlValue::Kind::kInteger);
  EXPECT_EQ(t.FindValue("i")->integer_value, -1000);
  EXPECT_EQ(t.FindValue("big")->integer_value, INT64_MAX);
  EXPECT_EQ(t.FindValue("f")->kind, TomlValue::Kind::kFloat);
  EXPECT_DOUBLE_EQ(t.FindValue("f")->float_value, 0.625);
  EXPECT_TRUE(std::isinf(t.FindValue("g")->float_value) && t.FindValue("g")->float_value < 0);
  EXPECT_TRUE(t.FindValue("yes")->boolean_value);
  EXPECT_EQ(t.FindValue("no")->kind, TomlValue::Kind::kBoolean);
  EXPECT_FALSE(t.FindValue("no")->boolean_value);
  EXPECT_EQ(t.FindValue("no")->line, 8);
}

TEST(TomlParserTest, ParsesMultiLineArraysWithCommentsAndTrailingComma) {
  TomlTable t = ParseOk(
      "devices = [\n"
      "  \"cuda:0\",  # first\n"
      "  \"cuda:1\",\n"
      "]\n"
      "ints = [1, 2, 3]\n"
      "nested = [[1], []]\n"
      "after = 1\n");
  const TomlValue* d = t.FindValue("devices");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->elements.size(), 2u);
  EXPECT_EQ(d->elements[1].string_value, "cuda:1");
  EXPECT_EQ(t.FindValue("ints")->elements[2].integer_value, 3);
  EXPECT_EQ(t.FindValue("nested")->elements[0].elements[0].integer_value, 1);
  EXPECT_TRUE(t.FindValue("nested")->elements[1].elements.empty());
  EXPECT_EQ(t.FindValue("after")->line, 7);
}

TEST(TomlParserTest, ParsesTablesDottedHeadersAndArraysOfTables) {
  TomlTable t = ParseOk(
      "top = 1\n"
      "[coordinator]\n"
      "host = \"h\"\n"
      "[coordinator.limits]\n"
      "max = 5\n"
      "[[group]]\n"
      "name = \"a\"\n"
      "[group.extra]\n"
      "x = 1\n"
      "[[group]]\n"
      "name = \"b\"\n"
      "[\"quoted key\"]\n");
  EXPECT_EQ(t.FindValue("top")->integer_value, 1);
  const TomlTable* c = t.FindTable("coordinator");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->line, 2);
  EXPECT_EQ(c->FindValue("host")->string_value, "h");
  EXPECT_EQ(c->FindTable("limits")->FindValue("max")->integer_value, 5);
  const auto& groups = t.FindTableArray("group");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0]->FindValue("name")->string_value, "a");
  EXPECT_EQ(groups[0]->FindTable("extra")->FindValue("x")->integer_value, 1);
  EXPECT_EQ(groups[1]->FindValue("name")->string_value, "b");
  EXPECT_EQ(groups[1]->line, 10);
  EXPECT_NE(t.FindTable("quoted key"), nullptr);
  EXPECT_THAT(t.Keys(), ::testing::ElementsAre("coordinator", "group", "quoted key", "top"));
}

TEST(TomlParserTest, AcceptsCrLfAndEmptyInput) {
  TomlTable t = ParseOk("a = 1\r\n# c\r\n\r\nb = 2\r\n");
  EXPECT_EQ(t.FindValue("b")->line, 4);
  EXPECT_TRUE(ParseOk("").Keys().empty());
  EXPECT_TRUE(ParseOk("# only a comment").Keys().empty());
}

struct ErrorCase {
  std::string text;
  std::string message;  // expected substring, "t.toml:LINE: ..." included
};

TEST(TomlParserTest, MalformedInputNamesTheLine) {
  const std::vector<ErrorCase> cases = {
      {"a = 1\nb = \n", "t.toml:2: expected a value after '='"},
      {"a = 1\na = 2\n", "t.toml:2: duplicate key 'a'"},
      {"a = \"open\n", "t.toml:1: unterminated string"},
      {"\n\nx = [1, 2\n", "t.toml:3: unterminated array"},
      {"x = [1 2]\n", "t.toml:1: expected ',' or ']' in an array"},
      {"a.b = 1\n", "t.toml:1: dotted key"},
      {"t = {a = 1}\n", "t.toml:1: inline tables"},
      {"s = \"\"\"x\"\"\"\n", "t.toml:1: multi-line strings"},
      {"h = 0xff\n", "t.toml:1: '0xff': hexadecimal"},
      {"d = 2024-01-01\n", "t.toml:1: '2024-01-01': dates"},
      {"n = 012\n", "t.toml:1: '012': leading zeros"},
      {"n = 1__0\n", "t.toml:1: '1__0' is not a value"},
      {"n = 99999999999999999999\n", "t.toml:1: '99999999999999999999' is out of range"},
      {"s = bare\n", "t.toml:1: 'bare' is not a value (strings need quotes)"},
      {"a = 1 2\n", "t.toml:1: unexpected '2'; expected the end of the line"},
      {"[t]\n[t]\n", "t.toml:2: table [t] is defined twice"},
      {"a = 1\n[a]\n", "t.toml:2: 'a' is already a value"},
      {"[[g]]\n[g]\n", "t.toml:2: 'g' is already an array of tables"},
      {"[t\n", "t.toml:1: expected ']' to close the header [t"},
      {"[[t]\n", "t.toml:1: expected ']]'"},
      {"= 1\n", "t.toml:1: expected a key, found '='"},
      {"s = \"\\q\"\n", "t.toml:1: unknown escape \\'q'"},
      {"s = \"\\uD800\"\n", "not a Unicode scalar value"},
      {"s = \"a\x01\"\n", "t.toml:1: control character byte 0x01 in a string"},
      {"\n\n\xff = 1\n", "t.toml:3: invalid UTF-8"},
      {"a = 1\rb = 2\n", "t.toml:1: unexpected byte 0x0d"},
  };
  for (const ErrorCase& c : cases) {
    EXPECT_THAT(ParseError(c.text), HasSubstr(c.message)) << "input: " << c.text;
  }
}

TEST(TomlParserTest, DeepNestingIsRefusedNotRecursedWithoutBound) {
  const std::string deep = "a = " + std::string(100000, '[');
  EXPECT_THAT(ParseError(deep), HasSubstr("nested deeper than"));
}

// Random bytes, and random mutations of a valid document, must give a value
// or an error: never a crash, a hang or an out-of-bounds read (run under ASan
// by the asan preset).
TEST(TomlParserTest, RandomInputNeverCrashes) {
  std::mt19937 rng(20240607);
  const std::string seed_doc =
      "[coordinator]\ncontrol = \"tcp://127.0.0.1:5555\"\n[[target_group]]\nname = 'g'\ntp = 2\n"
      "devices = [\"cuda:0\", \"cuda:1\"]\nf = 1.5e3\nb = true\n";
  const std::string alphabet = "[]=\"'#.,\\\n\r\t {}-+_0123456789eEabtrufnsxu\x01\xc3\xa9\xff";
  int parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text;
    if (iter % 2 == 0) {
      const size_t len = rng() % 64;
      for (size_t i = 0; i < len; ++i) {
        text.push_back(iter % 4 == 0 ? static_cast<char>(rng() & 0xff)
                                     : alphabet[rng() % alphabet.size()]);
      }
    } else {
      text = seed_doc;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % (text.size() + 1);
        switch (rng() % 3) {
          case 0:
            text.insert(at, 1, alphabet[rng() % alphabet.size()]);
            break;
          case 1:
            if (at < text.size()) text.erase(at, 1);
            break;
          default:
            text = text.substr(0, at);
            break;
        }
      }
    }
    absl::StatusOr<TomlTable> t = ParseToml(text, "fuzz");
    if (t.ok()) {
      ++parsed;
    } else {
      EXPECT_THAT(std::string(t.status().message()), ::testing::StartsWith("fuzz:"));
    }
  }
  EXPECT_GT(parsed, 0);  // the mutations are not all fatal: valid paths are exercised too
}

}  // namespace
}  // namespace splitspec::config
