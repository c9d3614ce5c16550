// The top-level integer literals of a JSON object (coordinator/http/json_integers.h).
#include "coordinator/http/json_integers.h"

#include "coordinator/http/json_guard.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

JsonMemberIntegers IndexChecked(absl::string_view json) {
  EXPECT_TRUE(CheckJsonText(json).ok()) << json;
  return JsonMemberIntegers::Index(json);
}

TEST(JsonMemberIntegersTest, KeepsEachTopLevelIntegerLiteralAsWritten) {
  const JsonMemberIntegers integers = IndexChecked(
      R"( { "seed" : 9007199254740993, "n":-1, "big":123456789012345678901234567890,
            "zero":0, "t":0.5, "e":1e3, "one":1.0 } )");
  EXPECT_EQ(integers.Find("seed"), "9007199254740993");
  EXPECT_EQ(integers.Find("n"), "-1");
  EXPECT_EQ(integers.Find("big"), "123456789012345678901234567890");
  EXPECT_EQ(integers.Find("zero"), "0");
  // Numbers with a fraction or an exponent are not integer literals.
  EXPECT_FALSE(integers.Find("t").has_value());
  EXPECT_FALSE(integers.Find("e").has_value());
  EXPECT_FALSE(integers.Find("one").has_value());
  EXPECT_FALSE(integers.Find("absent").has_value());
}

TEST(JsonMemberIntegersTest, SkipsNestedValuesAndStringsThatLookLikeStructure) {
  const JsonMemberIntegers integers =
      IndexChecked(R"({"prompt":[1,2,{"seed":5}],"s":"}],\"seed\":7,","o":{"a":{"b":[]}},"t":true,)"
                   R"("f":false,"z":null,"seed":42})");
  EXPECT_EQ(integers.Find("seed"), "42");
  EXPECT_FALSE(integers.Find("prompt").has_value());
  EXPECT_FALSE(integers.Find("a").has_value());  // nested members are not top-level
  EXPECT_FALSE(integers.Find("z").has_value());
}

TEST(JsonMemberIntegersTest, DecodesEscapedNamesAndKeepsTheLastOfARepeatedOne) {
  const JsonMemberIntegers integers =
      IndexChecked(R"({"\u0073eed":3,"max\ttokens":4,"\ud83d\ude00":5,"n":1,"n":2})");
  EXPECT_EQ(integers.Find("seed"), "3");
  EXPECT_EQ(integers.Find("max\ttokens"), "4");
  EXPECT_EQ(integers.Find("\xF0\x9F\x98\x80"), "5");
  EXPECT_EQ(integers.Find("n"), "2");
}

TEST(JsonMemberIntegersTest, NotAnObjectHasNoMembers) {
  EXPECT_FALSE(IndexChecked("[1,2]").Find("0").has_value());
  EXPECT_FALSE(IndexChecked("7").Find("").has_value());
  EXPECT_FALSE(IndexChecked("{}").Find("").has_value());
}

}  // namespace
}  // namespace splitspec::coordinator::http
