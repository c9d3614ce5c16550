// `splitspec bench serve` end to end on the tiny chat model: it starts two
// clusters (speculation on: a lookup draft worker; off: --drafts 0), sends a
// workload of chat and completion lines at concurrency 1 and 2, checks the
// outputs on == off, and prints one JSON object per concurrency. Timings are
// checked for presence and consistency only, never against a bound.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using ::testing::HasSubstr;

struct CommandRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

CommandRun RunSplitspec(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {BinaryPath("splitspec")};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<ChildProcess> child = ChildProcess::Spawn(argv, log);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return {};
  absl::StatusOr<int> code = child->Wait(absl::Minutes(8));
  EXPECT_TRUE(code.ok()) << code.status();
  return {code.ok() ? *code : -1, child->ReadLog()};
}

class BenchServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(absl::StrCat("bench-serve-", getpid()));
    ASSERT_FALSE(dir_.empty());
    model_ = dir_ + "/tiny-chat.gguf";
    ASSERT_TRUE(model::MakeTinyChatModel().WriteFile(model_).ok());
    workload_ = dir_ + "/workload.jsonl";
    std::ofstream(workload_)
        << R"({"category": "chat", "messages": [{"role": "user", "content": "the cat sat on the mat"}], "max_tokens": 24})"
           "\n"
        << R"({"category": "chat", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}], "max_tokens": 16})"
           "\n"
        << R"({"category": "completion", "prompt": "the cat sat on the mat and the cat", "max_tokens": 20})"
           "\n";
    config_ = dir_ + "/cluster.toml";
    std::ofstream(config_) << "[[target_group]]\nname = \"target\"\nthreads = 1\n"
                           << "[[draft_pool]]\nname = \"draft\"\ncount = 1\ndrafter = \"lookup\"\n";
  }

  std::string dir_, model_, workload_, config_;
};

const Value* Field(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? nullptr : &it->second;
}

double Number(const Struct& object, const std::string& name) {
  const Value* value = Field(object, name);
  EXPECT_NE(value, nullptr) << "no field " << name;
  return value == nullptr ? -1 : value->number_value();
}

const Struct& Side(const Struct& row, const std::string& name) {
  static const Struct* const empty = new Struct;
  const Value* value = Field(row, name);
  EXPECT_TRUE(value != nullptr && value->kind_case() == Value::kStructValue)
      << "no object " << name;
  return value != nullptr ? value->struct_value() : *empty;
}

TEST_F(BenchServeTest, SweepsConcurrencyAndPrintsOneJsonObjectEach) {
  const CommandRun run =
      RunSplitspec({"bench", "serve", "--model", model_, "--workload", workload_, "--config",
                    config_, "--concurrency", "1,2", "--log-dir", dir_ + "/clusters", "--json"},
                   dir_ + "/bench.log");
  ASSERT_EQ(run.code, 0) << run.output;
  std::vector<Struct> rows;
  for (absl::string_view line : absl::StrSplit(run.output, '\n')) {
    if (!absl::StartsWith(line, "{")) continue;  // stderr's progress lines
    Struct row;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                    google::protobuf::StringPiece(line.data(), line.size()), &row)
                    .ok())
        << line;
    rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 2u) << run.output;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Struct& row = rows[i];
    SCOPED_TRACE(absl::StrCat("row ", i));
    EXPECT_EQ(Field(row, "bench")->string_value(), "serve");
    EXPECT_EQ(Number(row, "concurrency"), i + 1.0);
    EXPECT_EQ(Number(row, "requests"), 3);
    EXPECT_EQ(Field(row, "workload")->string_value(), workload_);
    EXPECT_TRUE(Field(row, "identical")->bool_value());
    const Struct& on = Side(row, "on");
    const Struct& off = Side(row, "off");
    for (const Struct* side : {&on, &off}) {
      EXPECT_EQ(Number(*side, "rounds"), 1);
      EXPECT_EQ(Number(*side, "requests"), 3);
      EXPECT_GT(Number(*side, "tokens"), 0);
      EXPECT_GT(Number(*side, "seconds"), 0);
      EXPECT_NEAR(Number(*side, "tok_s"), Number(*side, "tokens") / Number(*side, "seconds"),
                  0.01 * Number(*side, "tok_s") + 0.01);
      EXPECT_GT(Number(*side, "ttft_p50_s"), 0);
      EXPECT_GE(Number(*side, "ttft_p99_s"), Number(*side, "ttft_p50_s"));
      EXPECT_GE(Number(*side, "itl_p99_s"), Number(*side, "itl_p50_s"));
      EXPECT_GE(Number(*side, "tpot_p99_s"), Number(*side, "tpot_p50_s"));
      EXPECT_GT(Number(*side, "tpot_p50_s"), 0);
    }
    // Greedy outputs are identical, so both sides generated the same tokens.
    EXPECT_EQ(Number(on, "tokens"), Number(off, "tokens"));
    EXPECT_NEAR(Number(row, "ratio"), Number(on, "tok_s") / Number(off, "tok_s"),
                1e-3 * Number(row, "ratio") + 1e-3);
    const Value* ratios = Field(row, "round_ratios");
    ASSERT_NE(ratios, nullptr);
    EXPECT_EQ(ratios->list_value().values_size(), 1);
  }
  // Both clusters were started with serve's flags, and stopped.
  EXPECT_THAT(run.output, HasSubstr("--drafts 0"));
  EXPECT_THAT(ReadFileOrEmpty(dir_ + "/clusters/on/serve.out"), HasSubstr("cluster ready"));
  EXPECT_THAT(ReadFileOrEmpty(dir_ + "/clusters/off/serve.out"), HasSubstr("0 draft worker"));
}

TEST_F(BenchServeTest, AClusterThatDoesNotAnswerFailsNamingTheRequestAndTheUrl) {
  const CommandRun run = RunSplitspec({"bench", "serve", "--model", model_, "--workload", workload_,
                                       "--url", "http://127.0.0.1:1", "--concurrency", "1"},
                                      dir_ + "/refused.log");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr(absl::StrCat("request 0 (", workload_,
                                                 ":1, chat), speculation on: POST "
                                                 "http://127.0.0.1:1/v1/chat/completions")));
}

TEST_F(BenchServeTest, FlagsThatNeedClustersStartedHereAreRefusedWithUrl) {
  const CommandRun run = RunSplitspec(
      {"bench", "serve", "--url", "http://127.0.0.1:1", "--threads", "2"}, dir_ + "/usage.log");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("with --url it starts none"));
}

}  // namespace
}  // namespace splitspec::testing
