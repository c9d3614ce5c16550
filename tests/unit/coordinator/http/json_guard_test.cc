// The strict, linear JSON check that runs before protobuf's parser, and the
// UTF-8 rule JsonQuote writes by.
#include "coordinator/http/json_guard.h"

#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "runtime/base/json_string.h"

namespace splitspec::coordinator::http {
namespace {

void ExpectRefused(const std::string& json, const std::string& reason_part) {
  const absl::Status status = CheckJsonText(json);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << json;
  EXPECT_TRUE(absl::StrContains(status.message(), reason_part)) << json << " -> " << status;
}

TEST(JsonGuardTest, AcceptsRfc8259Json) {
  for (const char* json : {R"({"prompt":"hi","max_tokens":5,"stop":["a","b"],"x":null})", "[]",
                           "{}", " 1 ", R"("\u00e9\n\"\\\/")", "-0.5e+10",
                           R"({"a":[{"b":[true,false]},{}],"c":"ü€😀"})", "[1,2,[3,[4]]]"}) {
    EXPECT_TRUE(CheckJsonText(json).ok()) << json << " -> " << CheckJsonText(json);
  }
}

TEST(JsonGuardTest, RefusesTrailingCommasThatProtobufAccepts) {
  ExpectRefused(R"({"prompt":"hi",})", "trailing comma at byte 15");
  ExpectRefused(R"({"stop":["a",]})", "trailing comma");
  // Protobuf's own parser lets this through: the reason for the strict check.
  google::protobuf::Value value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(R"({"stop":["a",]})", &value).ok());
}

TEST(JsonGuardTest, RefusesMalformedJsonNamingTheByte) {
  ExpectRefused("", "expected a value, found the end of the body");
  ExpectRefused("{", "expected a member name");
  ExpectRefused(R"({"a":1)", "unterminated object");
  ExpectRefused(R"({"a" 1})", "expected ':'");
  ExpectRefused("[1 2]", "expected ',' or ']'");
  ExpectRefused("[01]", "expected ',' or ']' at byte 2");
  ExpectRefused("[1.]", "digits must follow '.'");
  ExpectRefused("[tru]", "expected a value at byte 1");
  ExpectRefused("\"a\tb\"", "raw control character");
  ExpectRefused(R"(["\x"])", "unknown escape");
  ExpectRefused(R"(["\u12G4"])", "malformed \\u escape");
  ExpectRefused("{} {}", "unexpected data after the JSON value at byte 3");
}

TEST(JsonGuardTest, RefusesInvalidUtf8InStrings) {
  for (const std::string bad :
       {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80"}) {
    ExpectRefused("{\"prompt\":\"a" + bad + "\"}", "invalid UTF-8 in a string at byte 12");
  }
}

TEST(JsonGuardTest, NestingPastTheLimitIsRefusedInOnePass) {
  const int depth = 100000;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  const absl::Status status = CheckJsonText(deep, JsonLimits{.max_depth = 64});
  EXPECT_EQ(status.message(),
            "JSON body nests deeper than the limit of 64 arrays and objects at byte 64");
  EXPECT_TRUE(
      CheckJsonText(std::string(64, '[') + std::string(64, ']'), JsonLimits{.max_depth = 64}).ok());
  EXPECT_FALSE(CheckJsonText(std::string(65, '{'), JsonLimits{.max_depth = 64}).ok());
  std::string objects;
  for (int i = 0; i < 65; ++i) objects += R"({"a":)";
  EXPECT_TRUE(
      absl::StrContains(CheckJsonText(objects).message(), "nests deeper than the limit of 64"));
}

TEST(JsonGuardTest, Utf8SequenceLengthFollowsTheStandard) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9", 0), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82", 0), 0u);      // truncated
  EXPECT_EQ(Utf8SequenceLength("\xe0\x80\x80", 0), 0u);  // overlong
  EXPECT_EQ(Utf8SequenceLength("\xed\xbf\xbf", 0), 0u);  // a surrogate
}

TEST(JsonGuardTest, JsonQuoteNeverEchoesInvalidUtf8) {
  EXPECT_EQ(JsonQuote("model 'a\xff"
                      "b\xc3' \xc3\xa9"),
            "\"model 'a\\ufffdb\\ufffd' \xc3\xa9\"");
  EXPECT_TRUE(CheckJsonText(JsonQuote("\xed\xa0\x80\xf8\x80")).ok());
}

}  // namespace
}  // namespace splitspec::coordinator::http
