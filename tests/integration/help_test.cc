// Every binary, and every `splitspec` subcommand, answers --help and -h with
// exit status 0 and a help text that lists its flags.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"

namespace splitspec::testing {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::vector<std::string> argv;  // after the binary
  std::string binary;
  std::string known_flag;  // a flag the help must mention
};

std::vector<Case> Cases() {
  return {
      {{}, "splitspec-coordinator", "--drain-timeout-ms N"},
      {{}, "splitspec-draft-worker", "--lookahead N"},
      {{}, "splitspec-target-worker", "--step-tokens N"},
      {{}, "splitspec_bench_matmul", "--min-ms MS"},
      {{}, "splitspec_bench_collectives", "--threads-per-rank N"},
      {{}, "splitspec_write_bench_model", "--shape NAME"},
      {{}, "splitspec", "generate"},
      {{"serve"}, "splitspec", "--dry-run"},
      {{"client"}, "splitspec", "--prompt TEXT"},
      {{"status"}, "splitspec", "--timeout-ms N"},
      {{"scale"}, "splitspec", "--target-groups +N|-N"},
      {{"generate"}, "splitspec", "--target PATH"},
      {{"logits"}, "splitspec", "--prompt-ids 1,2,3"},
      {{"bench"}, "splitspec", "decode"},
      {{"bench", "decode"}, "splitspec", "--prefill-tokens N"},
      {{"bench", "spec"}, "splitspec", "--drafters LIST"},
      {{"bench", "verify"}, "splitspec", "--repeats N"},
      {{"bench", "serve"}, "splitspec", "--concurrency LIST"},
      {{"plan"}, "splitspec", "--cost-ratio C"},
      {{"keygen"}, "splitspec", "--out DIR"},
  };
}

TEST(HelpTest, EveryBinaryAndSubcommandAnswersHelp) {
  const std::string dir = MakeTempDir("help-test");
  int index = 0;
  for (const Case& c : Cases()) {
    for (const char* help : {"--help", "-h"}) {
      std::vector<std::string> argv = {BinaryPath(c.binary)};
      argv.insert(argv.end(), c.argv.begin(), c.argv.end());
      argv.push_back(help);
      std::string shown;
      for (const std::string& a : argv) shown += " " + a;
      const std::string log = dir + "/" + std::to_string(index++) + ".log";
      absl::StatusOr<ChildProcess> child = ChildProcess::Spawn(argv, log);
      ASSERT_TRUE(child.ok()) << shown << ": " << child.status();
      absl::StatusOr<int> code = child->Wait(absl::Seconds(60));
      ASSERT_TRUE(code.ok()) << shown << ": " << code.status();
      const std::string out = child->ReadLog();
      EXPECT_EQ(*code, 0) << shown << ":\n" << out;
      EXPECT_THAT(out, HasSubstr("usage: ")) << shown;
      EXPECT_THAT(out, HasSubstr(c.known_flag)) << shown << ":\n" << out;
    }
  }
}

TEST(HelpTest, AnUnknownFlagStillFailsNamingIt) {
  const std::string dir = MakeTempDir("help-test-unknown");
  absl::StatusOr<ChildProcess> child = ChildProcess::Spawn(
      {BinaryPath("splitspec-target-worker"), "--no-such-flag", "1"}, dir + "/unknown.log");
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<int> code = child->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2);
  EXPECT_THAT(child->ReadLog(), HasSubstr("unknown flag --no-such-flag"));
}

// --device names a CUDA device this machine lacks (no test machine has ten GPUs): both
// workers refuse it at start-up, before reading a model or reaching a coordinator.
TEST(HelpTest, WorkersRefuseAnAbsentDeviceAtStartUp) {
  const std::string dir = MakeTempDir("worker-device");
  for (const char* binary : {"splitspec-target-worker", "splitspec-draft-worker"}) {
    absl::StatusOr<ChildProcess> child =
        ChildProcess::Spawn({BinaryPath(binary), "--device", "cuda:9", "--model",
                             "/nonexistent.gguf", "--coordinator", "tcp://127.0.0.1:1"},
                            dir + "/" + binary + ".log");
    ASSERT_TRUE(child.ok()) << child.status();
    absl::StatusOr<int> code = child->Wait(absl::Seconds(60));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 1) << binary;
    EXPECT_THAT(child->ReadLog(), HasSubstr(std::string(binary) + ": cuda:9: ")) << binary;
  }
}

}  // namespace
}  // namespace splitspec::testing
