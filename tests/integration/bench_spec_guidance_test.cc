// `splitspec bench spec --workload FILE --guidance-scale S` on the tiny chat model:
// every configuration runs plain and guided ("NAME cfg") in the same run, and per
// category the JSON summary's cost of guidance and speculation's gain under guidance
// are the ratios of the rows' own tok/s; the text mode prints the same summary; the
// flag is refused outside [0, 100] and without --workload. And the bench's runner,
// RunSpecGeneration, really guides: the companion is fed, greedy guided speculation
// gives the guided target-only tokens, and guidance changes them. Also the workload's
// other flags on the same tiny model: --k lists and auto, --rounds (each ratio's range
// over the passes) and --draft-placement.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"
#include "tools/bench_spec.h"
#include "tools/commands.h"

namespace splitspec {
namespace {

using google::protobuf::Struct;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name;
}

// Removes its files when the test ends, however it ends.
struct RemovedAtExit {
  std::vector<std::string> paths;
  ~RemovedAtExit() {
    for (const std::string& path : paths) std::remove(path.c_str());
  }
};

std::string WriteChatModel() {
  const std::string path = TempPath("bench-guidance-chat.gguf");
  EXPECT_TRUE(model::MakeTinyChatModel().WriteFile(path).ok());
  return path;
}

std::string WriteWorkload() {
  const std::string path = TempPath("bench-guidance.jsonl");
  std::ofstream out(path);
  out << R"({"category": "qa", "messages": [{"role": "user", "content": "name a color"}],)"
      << R"( "max_tokens": 8})"
      << "\n"
      << R"({"category": "code", "messages": [{"role": "user", "content": "say x = 1"}],)"
      << R"( "max_tokens": 8})"
      << "\n";
  return path;
}

Struct ParseJson(const std::string& line) {
  Struct object;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &object).ok()) << line;
  return object;
}

double Number(const Struct& object, const std::string& key) {
  auto it = object.fields().find(key);
  EXPECT_NE(it, object.fields().end()) << key;
  return it == object.fields().end() ? -1.0 : it->second.number_value();
}

TEST(BenchSpecGuidanceTest, JsonRowsAndPerCategorySummaryOfTheSameRun) {
  const std::string model = WriteChatModel(), workload = WriteWorkload();
  const RemovedAtExit cleanup{{model, workload}};
  ::testing::internal::CaptureStdout();
  const int code = tools::RunBenchSpec({"--workload", workload, "--model", model, "--drafters",
                                        "ngram", "--k", "2", "--guidance-scale", "1.5", "--json"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  // Per category 6 rows (3 configurations, plain and guided), then one summary each.
  ASSERT_EQ(lines.size(), 14u) << out;
  const std::vector<std::string> configurations = {"target-only",   "ngram k=2",
                                                   "ngram auto",    "target-only cfg",
                                                   "ngram k=2 cfg", "ngram auto cfg"};
  std::map<std::string, std::map<std::string, double>> tok_s;  // category -> configuration -> tok/s
  for (int i = 0; i < 12; ++i) {
    const Struct row = ParseJson(lines[i]);
    const std::string category = row.fields().at("category").string_value();
    EXPECT_EQ(category, i < 6 ? "qa" : "code") << lines[i];
    EXPECT_EQ(row.fields().at("configuration").string_value(), configurations[i % 6]) << lines[i];
    tok_s[category][configurations[i % 6]] = Number(row, "tok_s");
    EXPECT_GT(Number(row, "tok_s"), 0.0) << lines[i];
  }
  for (int i = 12; i < 14; ++i) {
    const Struct summary = ParseJson(lines[i]);
    const std::string category = summary.fields().at("category").string_value();
    EXPECT_EQ(category, i == 12 ? "qa" : "code") << lines[i];
    EXPECT_DOUBLE_EQ(Number(summary, "guidance_scale"), 1.5);
    const std::map<std::string, double>& rows = tok_s[category];
    const double guided = rows.at("target-only cfg");
    // The rows print tok/s to 3 decimals: the ratios agree to well within 1%.
    const Struct& cost = summary.fields().at("cost").struct_value();
    EXPECT_NEAR(Number(cost, "tok_s_ratio"), guided / rows.at("target-only"),
                0.01 * guided / rows.at("target-only"))
        << lines[i];
    EXPECT_GT(Number(cost, "cpu_ms_per_token_ratio"), 0.0) << lines[i];
    const Struct& gain = summary.fields().at("speculation_gain").struct_value();
    ASSERT_EQ(gain.fields().size(), 2u) << lines[i];
    for (const std::string name : {"ngram k=2 cfg", "ngram auto cfg"}) {
      const double want = rows.at(name) / guided;
      EXPECT_NEAR(Number(gain, name), want, 0.01 * want) << lines[i];
    }
  }
}

TEST(BenchSpecWorkloadFlagsTest, KListsAutoRoundsAndPlacement) {
  const std::string model = WriteChatModel(), workload = WriteWorkload();
  const RemovedAtExit cleanup{{model, workload}};
  auto rows = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"--workload", workload, "--model", model, "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    ::testing::internal::CaptureStdout();
    const int code = tools::RunBenchSpec(args);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(code, 0) << out;
    std::vector<Struct> parsed;
    for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty()))
      parsed.push_back(ParseJson(std::string(line)));
    return parsed;
  };
  // Two fixed k rows and the auto row per category, over two passes: every ratio
  // lies within its passes' range.
  const std::vector<Struct> listed =
      rows({"--drafters", "ngram", "--k", "2,3", "--rounds", "2", "--limit", "1"});
  ASSERT_EQ(listed.size(), 8u);
  const std::vector<std::string> want = {"target-only", "ngram k=2", "ngram k=3", "ngram auto"};
  for (size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(listed[i].fields().at("configuration").string_value(), want[i % 4]);
    EXPECT_LE(Number(listed[i], "ratio_low"), Number(listed[i], "ratio_to_target_only") + 1e-3);
    EXPECT_GE(Number(listed[i], "ratio_high"), Number(listed[i], "ratio_to_target_only") - 1e-3);
  }
  // auto: the policy's rows only.
  const std::vector<Struct> auto_only =
      rows({"--drafters", "ngram", "--k", "auto", "--limit", "1", "--draft-placement", "workers"});
  ASSERT_EQ(auto_only.size(), 4u);
  EXPECT_EQ(auto_only[1].fields().at("configuration").string_value(), "ngram auto");

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(tools::RunBenchSpec({"--workload", workload, "--model", model, "--drafters", "self",
                                 "--draft-placement", "target"}),
            2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "splitspec bench spec: --draft-placement target: drafter 'self' needs a model, which "
            "runs in a draft worker (target runs lookup and ngram only)\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(tools::RunBenchSpec({"--workload", workload, "--model", model, "--k", "0"}), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "splitspec bench spec: --k: each K must be an integer in [1, 16] or auto, got '0'\n");
}

TEST(BenchSpecGuidanceTest, TextModePrintsTheSummary) {
  const std::string model = WriteChatModel(), workload = WriteWorkload();
  const RemovedAtExit cleanup{{model, workload}};
  ::testing::internal::CaptureStdout();
  const int code =
      tools::RunBenchSpec({"--workload", workload, "--model", model, "--drafters", "ngram", "--k",
                           "2", "--guidance-scale", "2", "--limit", "1"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("| qa            | ngram k=2 cfg      |"), std::string::npos) << out;
  EXPECT_NE(out.find("classifier-free guidance at scale 2, same run"), std::string::npos) << out;
  EXPECT_NE(out.find("  code          cost of guidance: tok/s "), std::string::npos) << out;
  EXPECT_NE(out.find("  qa            speculation under guidance: ngram auto cfg     tok/s "),
            std::string::npos)
      << out;
}

TEST(BenchSpecGuidanceTest, RefusesABadScaleAndTheFlagWithoutWorkload) {
  const std::string workload = WriteWorkload();
  const RemovedAtExit cleanup{{workload}};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(tools::RunBenchSpec({"--workload", workload, "--guidance-scale", "-1"}), 2);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--guidance-scale must be in [0, 100], got -1"), std::string::npos) << err;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(tools::RunBenchSpec({"--guidance-scale", "1.5"}), 2);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--guidance-scale runs only with --workload"), std::string::npos) << err;
}

TEST(BenchSpecGuidanceTest, RunSpecGenerationGuidesWithAndWithoutTheDrafter) {
  model::TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  const std::string path = TempPath("bench-guidance-runner.gguf");
  const RemovedAtExit cleanup{{path}};
  ASSERT_TRUE(model::WriteTinyModel(options, path).ok());
  auto target = model::Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(target.ok()) << target.status();
  auto tokenizer = model::LoadTokenizerFromGguf((*target)->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ngram = spec::MakeDrafter(*spec::ParseDrafterSpec("ngram", ""), path, &*tokenizer,
                                 (*target)->config().vocab_size, 1);
  ASSERT_TRUE(ngram.ok()) << ngram.status();
  const std::vector<int32_t> prompt = {17, 42, 99}, negative = {1, 250, 7, 7};
  constexpr int kTokens = 24;

  auto plain = tools::RunSpecGeneration(target->get(), nullptr, 1, 2, prompt, kTokens, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->stats.companion_forward_tokens(), 0u);
  auto guided = tools::RunSpecGeneration(target->get(), nullptr, 1, 2, prompt, kTokens, {},
                                         /*spec_cache=*/false, /*adaptive_window=*/false,
                                         /*guidance_scale=*/2.0f, negative);
  ASSERT_TRUE(guided.ok()) << guided.status();
  // The companion is fed its prompt and every generated token but the last.
  EXPECT_GE(guided->stats.companion_forward_tokens(), negative.size() + kTokens - 1);
  ASSERT_NE(guided->output, plain->output) << "guidance must change this output";
  auto speculative = tools::RunSpecGeneration(target->get(), ngram->get(), 2, 3, prompt, kTokens,
                                              {}, /*spec_cache=*/false,
                                              /*adaptive_window=*/false,
                                              /*guidance_scale=*/2.0f, negative);
  ASSERT_TRUE(speculative.ok()) << speculative.status();
  EXPECT_EQ(speculative->output, guided->output);
  EXPECT_GT(speculative->stats.verified(), 0u);
}

}  // namespace
}  // namespace splitspec
