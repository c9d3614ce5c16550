// `splitspec serve` with its default draft pool (lookup, placement auto) runs
// the drafter inside the target (target_worker/local_drafts.h): the plan starts
// no draft worker, the target drafts, and greedy completions over HTTP equal
// plain greedy decoding and what `serve --drafts 0` and `serve --drafter none`
// (plain decoding, both) return, token for token.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/http_stream_load.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr int kMaxTokens = 40;

// Prompts that repeat themselves (lookup has something to find) and one that does not.
const std::vector<std::vector<int32_t>> kPrompts = {
    {10, 20, 30, 10, 20, 30, 10, 20}, {200, 5, 200, 5, 200}, {1, 2, 3, 4}, {99, 98, 97, 99, 98}};

// The value of an unlabelled counter in a Prometheus page, or -1.
double MetricValue(const std::string& page, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, name + " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(name.size() + 1), &value)) return value;
  }
  return -1;
}

struct ServeRun {
  std::string output;                  // serve's stdout and stderr
  std::string target_log;              // the target worker's log
  std::vector<StreamOutcome> streams;  // one per kPrompts entry
  double accepted_tokens = -1;         // splitspec_spec_decode_num_accepted_tokens_total
};

// Starts `splitspec serve` on a config that names no [[draft_pool]] (so the
// built-in default pool: lookup, count 1, placement auto) plus `flags`, streams
// one greedy completion per prompt, reads /metrics, and stops it.
ServeRun RunServe(const std::string& dir, const std::string& model_path,
                  const std::vector<std::string>& flags) {
  ServeRun run;
  const std::string control = absl::StrCat("tcp://127.0.0.1:", FreeLoopbackPort());
  const int http_port = FreeLoopbackPort();
  const std::string config = dir + "/cluster.toml";
  std::ofstream(config) << "[cluster]\nrun_dir = \"" << dir << "\"\n"
                        << "[coordinator]\ncontrol = \"" << control << "\"\n"
                        << "http = \"127.0.0.1:" << http_port << "\"\n"
                        << "[models]\ntarget = \"" << model_path << "\"\n"
                        << "[[target_group]]\nname = \"target\"\nthreads = 1\n";
  std::vector<std::string> argv = {BinaryPath("splitspec"), "serve", "--config", config};
  argv.insert(argv.end(), flags.begin(), flags.end());
  const std::string out_path = dir + "/serve.out";
  auto serve = ChildProcess::Spawn(argv, out_path);
  EXPECT_TRUE(serve.ok()) << serve.status();
  if (!serve.ok()) return run;
  for (int attempt = 0; attempt < 1200; ++attempt) {
    if (absl::StrContains(ReadFileOrEmpty(out_path), "cluster ready") || !serve->running()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  run.output = ReadFileOrEmpty(out_path);
  EXPECT_TRUE(absl::StrContains(run.output, "cluster ready")) << run.output;
  for (const std::vector<int32_t>& prompt : kPrompts)
    run.streams.push_back(StreamCompletion(http_port, prompt, kMaxTokens));
  auto metrics = coordinator::http::HttpRequestOnce(http_port, "GET", "/metrics");
  if (metrics.ok())
    run.accepted_tokens =
        MetricValue(metrics->body, "splitspec_spec_decode_num_accepted_tokens_total");
  serve->Kill(SIGTERM);  // and reaps it: serve stops its workers first
  run.output = ReadFileOrEmpty(out_path);
  run.target_log = ReadFileOrEmpty(dir + "/target.log");
  return run;
}

TEST(ServeLocalDraftTest, TheDefaultLookupDrafterRunsInTheTargetAndChangesNoToken) {
  const std::string dir = MakeTempDir(absl::StrCat("splitspec-local-draft-", getpid()));
  ASSERT_FALSE(dir.empty());
  const std::string model_path = dir + "/tiny-chat.gguf";
  ASSERT_TRUE(model::MakeTinyChatModel().WriteFile(model_path).ok());
  const std::vector<std::string> expected = PlainGreedyTexts(model_path, kPrompts, kMaxTokens);
  ASSERT_EQ(expected.size(), kPrompts.size());

  // The heartbeat flag only shortens start-up; the security keys are serve's own.
  const ServeRun local = RunServe(dir, model_path, {"--heartbeat-ms", "100"});
  EXPECT_TRUE(absl::StrContains(local.output, "0 draft worker(s)")) << local.output;
  EXPECT_TRUE(absl::StrContains(local.output, "drafter lookup, in the target leaders"))
      << local.output;
  EXPECT_TRUE(absl::StrContains(local.target_log, "drafts with lookup")) << local.target_log;
  EXPECT_GT(local.accepted_tokens, 0) << "the target's own drafter never had a token accepted";

  const ServeRun drafts0 = RunServe(dir, model_path, {"--heartbeat-ms", "100", "--drafts", "0"});
  const ServeRun none = RunServe(dir, model_path, {"--heartbeat-ms", "100", "--drafter", "none"});
  for (const ServeRun* plain : {&drafts0, &none}) {
    EXPECT_TRUE(absl::StrContains(plain->output, "0 draft worker(s)")) << plain->output;
    EXPECT_FALSE(absl::StrContains(plain->target_log, "drafts with")) << plain->target_log;
    EXPECT_EQ(plain->accepted_tokens, 0) << "plain decoding drafted";
  }
  for (const ServeRun* run : {&local, &drafts0, &none}) {
    ASSERT_EQ(run->streams.size(), kPrompts.size());
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_TRUE(run->streams[i].completed) << i << ": " << run->streams[i].failure;
      EXPECT_EQ(run->streams[i].text, expected[i]) << "prompt " << i;
    }
  }
}

}  // namespace
}  // namespace splitspec::testing
