// `splitspec bench serve` end to end on the tiny chat model: it starts two
// clusters (speculation on: a lookup draft worker; off: --drafts 0), sends a
// workload of chat and completion lines at concurrency 1 and 2, checks the
// outputs on == off, and prints one JSON object per concurrency. Timings are
// checked for presence and consistency only, never against a bound.
#include <unistd.h>

#include <csignal>
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
#include "tests/integration/http_stream_load.h"
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

  // Starts `splitspec serve` of `model` (extra flags after) on free loopback ports and
  // waits (bounded) until it is ready; its HTTP base URL.
  std::string StartServe(const std::string& name, const std::string& model,
                         const std::vector<std::string>& extra) {
    const int http_port = FreeLoopbackPort();
    const int control_port = FreeLoopbackPort();
    EXPECT_NE(http_port, 0);
    std::vector<std::string> argv = {BinaryPath("splitspec"),
                                     "serve",
                                     "--config",
                                     config_,
                                     "--model",
                                     model,
                                     "--http",
                                     absl::StrCat("127.0.0.1:", http_port),
                                     "--control",
                                     absl::StrCat("tcp://127.0.0.1:", control_port),
                                     "--log-dir",
                                     dir_ + "/" + name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const std::string out = dir_ + "/" + name + ".out";
    absl::StatusOr<ChildProcess> serve = ChildProcess::Spawn(argv, out);
    EXPECT_TRUE(serve.ok()) << serve.status();
    if (!serve.ok()) return "";
    serves_.push_back(*std::move(serve));
    for (int i = 0; i < 1200 && !absl::StrContains(ReadFileOrEmpty(out), "cluster ready"); ++i)
      absl::SleepFor(absl::Milliseconds(100));
    EXPECT_THAT(ReadFileOrEmpty(out), HasSubstr("cluster ready"));
    return absl::StrCat("http://127.0.0.1:", http_port);
  }

  void TearDown() override {
    for (ChildProcess& serve : serves_) serve.Kill(SIGTERM);
  }

  std::string dir_, model_, workload_, config_;
  std::vector<ChildProcess> serves_;
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
    EXPECT_EQ(Number(row, "clients"), i + 1.0);
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
    // Per category (name order), each side's tokens add up to the side's.
    const Value* categories = Field(row, "categories");
    ASSERT_NE(categories, nullptr);
    ASSERT_EQ(categories->list_value().values_size(), 2);
    const Struct& chat = categories->list_value().values(0).struct_value();
    const Struct& completion = categories->list_value().values(1).struct_value();
    EXPECT_EQ(Field(chat, "category")->string_value(), "chat");
    EXPECT_EQ(Field(completion, "category")->string_value(), "completion");
    for (const char* side : {"on", "off"}) {
      EXPECT_EQ(Number(Side(chat, side), "tokens") + Number(Side(completion, side), "tokens"),
                Number(Side(row, side), "tokens"));
      EXPECT_GT(Number(Side(chat, side), "tok_s_per_request"), 0);
      EXPECT_GT(Number(Side(chat, side), "tpot_mean_ms"), 0);
    }
  }
  // Both clusters were started with serve's flags, and stopped.
  EXPECT_THAT(run.output, HasSubstr("--drafts 0"));
  EXPECT_THAT(ReadFileOrEmpty(dir_ + "/clusters/on/serve.out"), HasSubstr("cluster ready"));
  EXPECT_THAT(ReadFileOrEmpty(dir_ + "/clusters/off/serve.out"), HasSubstr("0 draft worker"));
}

// With --url alone, off is the same cluster asked for "drafter": "none".
TEST_F(BenchServeTest, MeasuresARunningClusterAgainstDrafterNone) {
  const std::string url = StartServe("running", model_, {});
  const CommandRun run = RunSplitspec({"bench", "serve", "--model", model_, "--workload", workload_,
                                       "--url", url + "/", "--concurrency", "2"},
                                      dir_ + "/url.log");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr(absl::StrCat("on = ", url,
                                                 " (its default), off = the same "
                                                 "with \"drafter\": \"none\"")));
  EXPECT_THAT(run.output, HasSubstr("on/off"));  // the table
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(run.output, '\n'))
    rows += absl::StartsWith(line, "          2  o");  // "on" and "off" at concurrency 2
  EXPECT_EQ(rows, 2) << run.output;
}

// Two clusters of different weights answer differently: the check fails the run,
// naming the request and the first token at which the outputs part.
TEST_F(BenchServeTest, DifferentOutputsFailNamingTheRequestAndTheFirstDifferingToken) {
  // Tiny models of seeds 3 and 4 (the same vocabulary, other weights) continue this
  // prompt greedily with "nnnn..." and " the the ...": printable text, which the
  // front door streams as it is (most seeds start with bytes that are not UTF-8).
  std::string models[2];
  for (uint32_t seed : {3u, 4u}) {
    model::TinyModelOptions options;
    options.weight_type = kernels::GgmlType::kQ8_0;
    options.seed = seed;
    models[seed - 3] = absl::StrCat(dir_, "/tiny-seed", seed, ".gguf");
    ASSERT_TRUE(model::WriteTinyModel(options, models[seed - 3]).ok());
  }
  const std::string completions = dir_ + "/completions.jsonl";
  std::ofstream(completions)
      << R"({"category": "c", "prompt": "hello world, this is a test of the", "max_tokens": 12})"
      << "\n";
  const std::string on = StartServe("on", models[0], {"--drafts", "0"});
  const std::string off = StartServe("off", models[1], {"--drafts", "0"});
  const CommandRun run =
      RunSplitspec({"bench", "serve", "--model", models[0], "--workload", completions, "--url", on,
                    "--off-url", off, "--concurrency", "1"},
                   dir_ + "/differ.log");
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr(absl::StrCat("request 0 (", completions,
                                     ":1, c) at concurrency 1, round "
                                     "1: greedy outputs with speculation on and off differ at "
                                     "output token 0 (after \"\"): on has token ")));
  EXPECT_THAT(run.output, HasSubstr("off has token 261 \" the\""));
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
