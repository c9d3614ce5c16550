// The `splitspec logits` and `splitspec generate` subcommands on a tiny model,
// run as a subprocess (the built binary), checked against the library directly.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/device.h"
#include "runtime/model/transformer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

using ::testing::HasSubstr;

struct CommandResult {
  int exit_code;
  std::string stdout_text;
};

// Runs `splitspec <args>` (stderr folded into stdout).
CommandResult RunSplitspec(const std::string& args) {
  const std::string cmd = absl::StrCat(SPLITSPEC_BIN_DIR, "/splitspec ", args, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

class ModelCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-model_commands_test.gguf";
    ASSERT_TRUE(WriteTinyModel(TinyModelOptions{}, path_).ok());
    auto model = Transformer::Load(path_, {.threads = 1});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }
  std::string path_;
  std::unique_ptr<Transformer> model_;
};

TEST_F(ModelCommandsTest, LogitsPrintsLastPositionExactly) {
  const std::vector<int32_t> ids = {0, 72, 101, 108};
  auto cache = model_->NewCache();
  ForwardOutput out;
  ASSERT_TRUE(model_->Forward({{cache.get(), ids, LogitsMode::kLast}}, &out).ok());
  std::string expected = "{\"logits\":[";
  for (int i = 0; i < out.vocab_size; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", out.Row(0, 0)[i]);
    absl::StrAppend(&expected, i > 0 ? "," : "", buf);
  }
  expected += "]}\n";
  const CommandResult r = RunSplitspec(
      absl::StrCat("logits --model ", path_, " --prompt-ids 0,72,101,108 --threads 2"));
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text;
  EXPECT_EQ(r.stdout_text, expected);
}

TEST_F(ModelCommandsTest, GenerateJsonIsGreedyDecoding) {
  const std::vector<int32_t> prompt = {0, 72, 101};
  auto cache = model_->NewCache();
  ForwardOutput out;
  std::vector<int32_t> expected;
  std::vector<int32_t> input = prompt;
  for (int step = 0; step < 6; ++step) {
    ASSERT_TRUE(model_->Forward({{cache.get(), input, LogitsMode::kLast}}, &out).ok());
    int32_t best = 0;
    for (int i = 1; i < out.vocab_size; ++i)
      best = out.Row(0, 0)[i] > out.Row(0, 0)[best] ? i : best;
    expected.push_back(best);
    input.assign(1, best);
  }
  const CommandResult r = RunSplitspec(
      absl::StrCat("generate --target ", path_,
                   " --drafter none --prompt-ids 0,72,101 --max-tokens 6 --ignore-eos --json"));
  EXPECT_EQ(r.exit_code, 0) << r.stdout_text;
  EXPECT_THAT(r.stdout_text,
              HasSubstr(absl::StrCat("{\"token_ids\":[", absl::StrJoin(expected, ","), "]")));
  EXPECT_THAT(r.stdout_text,
              HasSubstr("\"stats\":{\"drafted\":0,\"verified\":0,\"accepted\":0,\"steps\":6}}"));
}

TEST_F(ModelCommandsTest, GenerateEncodesPromptText) {
  auto tokenizer = LoadTokenizerFromGguf(model_->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->Encode(" the", {.add_special = false}),
            (std::vector<int32_t>{261}));  // merge "Ġt he" -> token 259 + 2
  const CommandResult by_text = RunSplitspec(absl::StrCat(
      "generate --target ", path_, " --prompt ' the' --max-tokens 3 --ignore-eos --json"));
  const CommandResult by_ids = RunSplitspec(absl::StrCat(
      "generate --target ", path_, " --prompt-ids 261 --max-tokens 3 --ignore-eos --json"));
  EXPECT_EQ(by_text.exit_code, 0) << by_text.stdout_text;
  EXPECT_EQ(by_text.stdout_text, by_ids.stdout_text);
}

TEST_F(ModelCommandsTest, DeviceFlagIsParsedAndAnAbsentGpuRefusedAtStartUp) {
  for (const char* command : {"generate --prompt-ids 1 --target", "bench decode --model",
                              "bench verify --model"}) {
    const CommandResult bad = RunSplitspec(absl::StrCat(command, " ", path_, " --device gpu"));
    EXPECT_EQ(bad.exit_code, 2) << command << ": " << bad.stdout_text;
    EXPECT_THAT(bad.stdout_text, HasSubstr("--device: device 'gpu' is not cpu or cuda:N"))
        << command;
  }
  const DeviceProbe& probe = SystemDeviceProbe();
  if (probe.cuda_built() && probe.CudaDeviceCount() > 0) return;  // the gpu tests run it there
  for (const char* command : {"generate --prompt-ids 1 --target", "bench decode --model",
                              "bench verify --model"}) {
    const CommandResult absent =
        RunSplitspec(absl::StrCat(command, " ", path_, " --device cuda:0"));
    EXPECT_EQ(absent.exit_code, 1) << command << ": " << absent.stdout_text;
    EXPECT_THAT(absent.stdout_text,
                HasSubstr(probe.cuda_built() ? "cuda:0: no such device (0 CUDA devices visible)"
                                             : "cuda:0: this splitspec was built without CUDA"))
        << command;
  }
}

TEST_F(ModelCommandsTest, RefusesBadFlagsWithTheirNames) {
  const CommandResult bad_k = RunSplitspec(
      absl::StrCat("generate --target ", path_, " --prompt-ids 1 --drafter ngram --k 0"));
  EXPECT_EQ(bad_k.exit_code, 2);
  EXPECT_THAT(bad_k.stdout_text, HasSubstr("--k 0 out of range [1, 64] (or auto)"));
  const CommandResult drafter =
      RunSplitspec(absl::StrCat("generate --target ", path_, " --prompt-ids 1 --drafter bogus"));
  EXPECT_EQ(drafter.exit_code, 2);
  EXPECT_THAT(drafter.stdout_text, HasSubstr("unknown drafter 'bogus'"));
  const CommandResult greedy_hot = RunSplitspec(absl::StrCat(
      "generate --target ", path_, " --prompt-ids 1 --verify greedy --temperature 0.7"));
  EXPECT_EQ(greedy_hot.exit_code, 2);
  EXPECT_THAT(greedy_hot.stdout_text, HasSubstr("--verify greedy needs --temperature 0"));
  const CommandResult bad_token =
      RunSplitspec(absl::StrCat("logits --model ", path_, " --prompt-ids 1,99999"));
  EXPECT_EQ(bad_token.exit_code, 1);
  EXPECT_THAT(bad_token.stdout_text, HasSubstr("token 1 = 99999 outside the vocabulary"));
  const CommandResult missing = RunSplitspec("logits --model /nonexistent.gguf --prompt-ids 1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.stdout_text, HasSubstr("/nonexistent.gguf"));
}

// --tree: each tree's row beside the chain of as many tokens, and in the JSON line.
TEST_F(ModelCommandsTest, BenchVerifyTreeTimesTheTreesBesideChains) {
  const CommandResult r =
      RunSplitspec(absl::StrCat("bench verify --model ", path_, " --threads 1 --repeats 1 --tree"));
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text;
  for (const char* row : {"tree chain5     5 nodes, depth  4", "tree trie2x2x2 15 nodes, depth  3",
                          "tree star4x4   17 nodes, depth  4", "tree trie16    16 nodes, depth  3",
                          "tree trie32    32 nodes, depth  4", "chain of 32:", "k=17 ", "k=32 "}) {
    EXPECT_THAT(r.stdout_text, HasSubstr(row));
  }
  EXPECT_THAT(r.stdout_text, HasSubstr("\"tree_cost_ratio\":{\"chain5\":"));
}

}  // namespace
}  // namespace splitspec::model
