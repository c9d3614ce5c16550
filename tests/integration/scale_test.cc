// `splitspec scale` against a cluster of processes on loopback, under a steady
// load of greedy requests: a draft worker is added and the old one drained, a
// tensor-parallel target group (2 ranks) is added and the old TP=1 target
// drained (with a 1 ms drain timeout, so the requests running on it are
// re-placed on the group from their committed tokens).
// Every request must finish with its full length and equal plain greedy
// decoding token for token; the drained workers must exit with status 0.
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/scale_test_util.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

int CountState(const proto::StatusReply& s, proto::Role role, proto::MemberState state) {
  int n = 0;
  for (const proto::MemberStatus& m : s.members()) n += m.role() == role && m.state() == state;
  return n;
}

uint64_t IdOf(const proto::StatusReply& s, const std::string& name) {
  for (const proto::MemberStatus& m : s.members()) {
    if (m.worker_name() == name) return m.worker_id();
  }
  return 0;
}

TEST(ScaleTest, ScaleUpAndDrainUnderLoadLosesNothing) {
  const std::string dir = MakeTempDir(absl::StrCat("splitspec-scale-", getpid()));
  ASSERT_FALSE(dir.empty());
  const std::string model_path = dir + "/tiny.gguf";
  model::TinyModelOptions tiny;
  tiny.weight_type = kernels::GgmlType::kQ8_0;
  ASSERT_TRUE(model::WriteTinyModel(tiny, model_path).ok());
  auto coordinator = StartCoordinator(dir, {"--heartbeat-ms", "100"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string endpoint = coordinator->second;
  // Self-draft (the target's own weights): every draft token is accepted, so a
  // request that shows accepted tokens was drafted by a live draft worker.
  auto target =
      ChildProcess::Spawn({BinaryPath("splitspec-target-worker"), "--coordinator", endpoint,
                           "--name", "target-0", "--model", model_path, "--threads", "1"},
                          dir + "/target-0.log");
  ASSERT_TRUE(target.ok());
  auto draft = ChildProcess::Spawn(
      {BinaryPath("splitspec-draft-worker"), "--coordinator", endpoint, "--name", "draft-0",
       "--threads", "1", "--drafter", "model", "--draft", model_path, "--target-model", model_path},
      dir + "/draft-0.log");
  ASSERT_TRUE(draft.ok());
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        return CountState(s, proto::ROLE_TARGET_WORKER, proto::MEMBER_STATE_ALIVE) == 1 &&
               CountState(s, proto::ROLE_DRAFT_WORKER, proto::MEMBER_STATE_ALIVE) == 1;
      },
      1500, absl::Milliseconds(20), &status))
      << status.DebugString() << target->ReadLog() << draft->ReadLog();
  const uint64_t target0 = IdOf(status, "target-0");
  const uint64_t draft0 = IdOf(status, "draft-0");

  auto reference = model::Transformer::Load(model_path, {.threads = 1});
  ASSERT_TRUE(reference.ok());
  const std::vector<std::vector<int32_t>> prompts = {
      {10, 20, 30, 10, 20, 30}, {7}, {200, 5, 200, 5, 200}, {1, 2, 3, 4}, {99, 98}, {42, 42, 42}};

  // The scaling steps run on a second thread while this one keeps 16 requests in flight.
  const std::vector<std::string> common = {"--coordinator", endpoint,   "--log-dir", dir,
                                           "--model",       model_path, "--threads", "1",
                                           "--wait-s",      "120"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), common.begin(), common.end());
    return args;
  };
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};
  std::vector<ScaleRun> runs;
  std::vector<pid_t> detached;
  std::thread scaler([&] {
    // Let the load build up first.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::vector<std::vector<std::string>> steps = {
        with({"--draft", "+1", "--draft-model", model_path}),
        with({"--draft", "-1", "--worker-ids", std::to_string(draft0)}),
        with({"--target-groups", "+1", "--target-tp", "2"}),  // a tensor-parallel group of 2 ranks
        // A 1 ms drain timeout: what still runs on target-0 is re-placed on the new target at once.
        with({"--target-groups", "-1", "--worker-ids", std::to_string(target0),
              "--drain-timeout-ms", "1"}),
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      runs.push_back(RunScale({}, steps[i], absl::StrCat(dir, "/scale-", i, ".log")));
      for (int64_t pid : runs.back().Values("started", "pid"))
        detached.push_back(static_cast<pid_t>(pid));
      phase = static_cast<int>(i) + 1;
      if (runs.back().exit_code != 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // load in between
    }
    stop = true;
  });
  LoadOptions load;
  load.in_flight = 16;
  load.max_tokens = 48;
  LoadOutcome outcome = RunGreedyLoad(endpoint, **reference, prompts, load, stop, phase);
  scaler.join();

  for (size_t i = 0; i < runs.size(); ++i) {
    std::printf("--- splitspec scale step %zu (exit %d):\n%s", i + 1, runs[i].exit_code,
                runs[i].output.c_str());
  }
  std::map<int, std::pair<int, int>> per_phase;  // submitted, drafted-and-accepted
  for (const auto& [id, result] : outcome.results) {
    auto& [submitted, drafted] = per_phase[outcome.phase_of[id]];
    ++submitted;
    drafted += result.stats.accepted() > 0;
  }
  for (const auto& [p, counts] : per_phase) {
    std::printf(
        "phase %d (after %d scale steps): %d requests finished, %d with accepted draft tokens\n", p,
        p, counts.first, counts.second);
  }
  std::printf(
      "requests: %d submitted, %d finished equal to plain greedy (%d tokens each), %zu failures\n",
      outcome.submitted, outcome.finished_ok, load.max_tokens, outcome.failures.size());
  StopDetached(detached);

  ASSERT_EQ(runs.size(), 4u) << "a scale step failed: " << runs.back().output;
  for (const ScaleRun& run : runs) EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(runs[0].Values("registered", "worker_id").size(), 1u) << runs[0].output;
  EXPECT_EQ(runs[1].Values("left", "worker_id"), std::vector<int64_t>{static_cast<int64_t>(draft0)})
      << runs[1].output;
  EXPECT_EQ(runs[2].Values("registered", "worker_id").size(), 2u) << runs[2].output;
  EXPECT_EQ(runs[3].Values("left", "worker_id"),
            std::vector<int64_t>{static_cast<int64_t>(target0)})
      << runs[3].output;
  EXPECT_EQ(runs[3].Values("pools", "draft_workers"), std::vector<int64_t>{1});
  EXPECT_EQ(runs[3].Values("pools", "target_groups"), std::vector<int64_t>{1});

  EXPECT_TRUE(outcome.failures.empty()) << absl::StrJoin(outcome.failures, "\n");
  EXPECT_EQ(outcome.finished_ok, outcome.submitted);
  EXPECT_GE(outcome.submitted, 16);
  // After draft-0 left, only the scaled-up draft worker can have drafted.
  int drafted_by_new = 0;
  for (const auto& [id, result] : outcome.results) {
    if (outcome.phase_of[id] >= 2) drafted_by_new += result.stats.accepted() > 0;
  }
  EXPECT_GT(drafted_by_new, 0) << "no request submitted after the drain used the new draft worker";

  // The drained workers exited on their own, cleanly, saying so.
  auto draft_exit = draft->Wait(absl::Seconds(30));
  ASSERT_TRUE(draft_exit.ok()) << draft->ReadLog();
  EXPECT_EQ(*draft_exit, 0) << draft->ReadLog();
  EXPECT_NE(draft->ReadLog().find("drained"), std::string::npos) << draft->ReadLog();
  auto target_exit = target->Wait(absl::Seconds(30));
  ASSERT_TRUE(target_exit.ok()) << target->ReadLog();
  EXPECT_EQ(*target_exit, 0) << target->ReadLog();
  EXPECT_NE(target->ReadLog().find("drained"), std::string::npos) << target->ReadLog();
}

TEST(ScaleTest, RefusesMalformedCountsWithTheFlagName) {
  const std::string dir = MakeTempDir(absl::StrCat("splitspec-scale-flags-", getpid()));
  ScaleRun run = RunScale({}, {"--draft", "3"}, dir + "/scale.log");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("--draft takes a signed count"), std::string::npos) << run.output;
  run = RunScale({}, {"--target-groups", "-1", "--worker-ids", "3,4"}, dir + "/scale2.log");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("--worker-ids"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace splitspec::testing
