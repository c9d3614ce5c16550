// Tensor-parallel target groups end to end.
//
// In one process (rank threads, Gloo on 127.0.0.1): a TP=2 target group decodes
// exactly as TP=2 plain decoding computed directly on Transformer ranks
// ranks, and speculative decoding on it (ngram drafter, and the target as its
// own draft) is lossless at temperature 0 against that.
//
// As processes: a TP=2 group (two splitspec-target-worker processes) beside a
// TP=1 target; the follower is killed with SIGKILL while requests are in
// flight. The group's leader notices on its next collective, leaves the
// cluster, the coordinator re-places the group's requests on the TP=1 target,
// and every request finishes with the full output. A restarted follower makes
// the group re-form and register again.
//
// The tiny model has F32 weights, so TP=2 and TP=1 differ only by float
// summation order (~1e-7 relative, runtime/model/transformer.h); greedy
// decoding picks the same tokens unless two logits tie that closely, which the
// direct comparison in TensorParallelPlainGreedyEqualsTp1 checks for this
// model and these prompts. Every wait is bounded by attempts, never timed.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/dist/gloo_communicator.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec::testing {
namespace {

constexpr int kMaxTokens = 24;

const std::vector<std::vector<int32_t>>& Prompts() {
  static const auto* prompts = new std::vector<std::vector<int32_t>>{
      {10, 20, 30, 10, 20, 30}, {7}, {200, 5, 200, 5, 200}, {42, 43, 44}};
  return *prompts;
}

std::string WriteModel(const std::string& dir) {
  const std::string path = dir + "/tiny.gguf";
  model::TinyModelOptions tiny;  // F32, 4 heads, 2 KV heads: splits 2 ways
  EXPECT_TRUE(model::WriteTinyModel(tiny, path).ok());
  return path;
}

// Plain greedy decoding on `size` Transformer ranks (threads),
// the reference for the group's outputs. Returns rank 0's tokens per prompt.
std::vector<std::vector<int32_t>> TensorParallelPlainGreedy(const std::string& model_path,
                                                            const std::string& dir, int size) {
  std::vector<std::vector<std::vector<int32_t>>> per_rank(size);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      auto store = net::FileRendezvousStore::Open(absl::StrCat(dir, "/store"));
      ASSERT_TRUE(store.ok()) << store.status();
      auto comm =
          net::GlooCommunicator::Create(**store, {.group = "reference", .rank = rank, .size = size},
                                        {.hostname = "127.0.0.1", .iface = ""});
      ASSERT_TRUE(comm.ok()) << comm.status();
      auto model = model::Transformer::Load(model_path, comm->get(), {.threads = 1});
      ASSERT_TRUE(model.ok()) << model.status();
      for (const auto& prompt : Prompts())
        per_rank[rank].push_back(PlainGreedy(**model, prompt, kMaxTokens));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 1; rank < size; ++rank) EXPECT_EQ(per_rank[rank], per_rank[0]) << "rank " << rank;
  return per_rank[0];
}

std::vector<std::vector<int32_t>> Tp1PlainGreedy(const std::string& model_path,
                                                 int max_tokens = kMaxTokens) {
  auto model = model::Transformer::Load(model_path, {.threads = 1});
  EXPECT_TRUE(model.ok());
  std::vector<std::vector<int32_t>> out;
  for (const auto& prompt : Prompts()) out.push_back(PlainGreedy(**model, prompt, max_tokens));
  return out;
}

proto::SubmitRequest GreedyRequest(const std::string& id, const std::vector<int32_t>& prompt,
                                   const std::string& drafter, int max_tokens = kMaxTokens) {
  proto::SubmitRequest submit;
  submit.set_request_id(id);
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.mutable_params()->set_temperature(0.0f);
  submit.mutable_params()->set_max_tokens(max_tokens);
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_drafter(drafter);
  submit.set_draft_k(4);
  return submit;
}

TEST(TensorParallelGroupTest, TensorParallelPlainGreedyEqualsTp1) {
  const std::string dir = MakeTempDir("splitspec-tp-reference");
  const std::string model_path = WriteModel(dir);
  EXPECT_EQ(TensorParallelPlainGreedy(model_path, dir, 2), Tp1PlainGreedy(model_path));
}

struct DrafterCase {
  std::string drafter;  // "none": TP=2 plain decoding through the cluster
  bool accepts_everything;
};

class TensorParallelPipelineTest : public ::testing::TestWithParam<DrafterCase> {};

TEST_P(TensorParallelPipelineTest, SpeculativeGreedyOnTp2EqualsTp2PlainGreedy) {
  const std::string dir = MakeTempDir("splitspec-tp-pipeline");
  const std::string model_path = WriteModel(dir);
  const std::vector<std::vector<int32_t>> expected = TensorParallelPlainGreedy(model_path, dir, 2);

  auto config_model = model::Transformer::Load(model_path, {.threads = 1});
  ASSERT_TRUE(config_model.ok());
  auto tokenizer = model::LoadTokenizerFromGguf((*config_model)->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto spec = spec::ParseDrafterSpec(GetParam().drafter, model_path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto drafter =
      spec::MakeDrafter(*spec, model_path, &*tokenizer, (*config_model)->config().vocab_size, 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  tools::InProcessClusterOptions options;
  options.target = config_model->get();
  options.drafter = drafter->get();
  options.target_tp = 2;
  options.target_path = model_path;
  options.target_threads = 1;
  auto cluster = tools::InProcessCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  ASSERT_TRUE(client.ok());
  for (size_t i = 0; i < Prompts().size(); ++i) {
    proto::SubmitRequest submit =
        GreedyRequest(absl::StrCat("tp2-", i), Prompts()[i], GetParam().drafter);
    auto got = (*client)->Generate(submit, absl::Seconds(120));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->tokens, expected[i]) << submit.request_id();
    if (GetParam().accepts_everything) {
      EXPECT_GT(got->stats.verified(), 0u);
      EXPECT_EQ(got->stats.accepted(), got->stats.verified())
          << "a self-draft must be accepted in full";
      // The per-position counters reach the client and add up.
      uint64_t accepted_at_sum = 0;
      for (uint64_t n : got->stats.accepted_at()) accepted_at_sum += n;
      EXPECT_EQ(accepted_at_sum, got->stats.accepted());
      EXPECT_EQ(
          std::vector<uint64_t>(got->stats.accepted_at().begin(), got->stats.accepted_at().end()),
          std::vector<uint64_t>(got->stats.verified_at().begin(), got->stats.verified_at().end()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Drafters, TensorParallelPipelineTest,
                         ::testing::Values(DrafterCase{"none", false}, DrafterCase{"ngram", false},
                                           DrafterCase{"model", true}),
                         [](const auto& info) { return info.param.drafter; });

int CountAlive(const proto::StatusReply& status, const std::string& group, int rank) {
  int alive = 0;
  for (const proto::MemberStatus& m : status.members()) {
    alive += m.state() == proto::MEMBER_STATE_ALIVE && m.tp_group() == group &&
             static_cast<int>(m.tp_rank()) == rank;
  }
  return alive;
}

ChildProcess SpawnRank(const std::string& dir, const std::string& endpoint,
                       const std::string& model_path, int rank, int generation) {
  auto child = ChildProcess::Spawn(
      {BinaryPath("splitspec-target-worker"), "--coordinator", endpoint, "--name",
       absl::StrCat("g0-rank-", rank), "--model", model_path, "--threads", "1", "--tp-group", "g0",
       "--tp-rank", std::to_string(rank), "--tp-size", "2", "--tp-timeout-ms", "5000"},
      absl::StrCat(dir, "/g0-rank-", rank, "-", generation, ".log"));
  EXPECT_TRUE(child.ok()) << child.status();
  return std::move(*child);
}

TEST(TensorParallelGroupTest, KilledFollowerLosesNoRequestAndTheGroupReforms) {
  const std::string dir = MakeTempDir("splitspec-tp-kill");
  const std::string model_path = WriteModel(dir);
  // Long enough that the group is still decoding when the follower dies (each
  // step of the group costs a few collectives on loopback).
  constexpr int kLongTokens = 200;
  const std::vector<std::vector<int32_t>> expected = Tp1PlainGreedy(model_path, kLongTokens);
  auto coordinator = StartCoordinator(dir, {"--heartbeat-ms", "100"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string endpoint = coordinator->second;
  ChildProcess leader = SpawnRank(dir, endpoint, model_path, 0, 0);
  ChildProcess follower = SpawnRank(dir, endpoint, model_path, 1, 0);
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        return CountAlive(s, "g0", 0) == 1 && CountAlive(s, "g0", 1) == 1;
      },
      1500, absl::Milliseconds(20), &status))
      << status.DebugString() << leader.ReadLog() << follower.ReadLog();

  // Only the group serves at first, so every request starts on it.
  auto client = net::RequestClient::Connect(endpoint);
  ASSERT_TRUE(client.ok());
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE((*client)
                    ->Submit(GreedyRequest(absl::StrCat("kill-", i),
                                           Prompts()[i % Prompts().size()], "none", kLongTokens))
                    .ok());
  }
  // Wait until the group has produced tokens, then kill the follower mid-flight.
  int tokens_seen = 0;
  for (int attempt = 0; attempt < 3000 && tokens_seen == 0; ++attempt) {
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
    for (int i = 0; i < kRequests; ++i) {
      tokens_seen += static_cast<int>((*client)->Result(absl::StrCat("kill-", i)).tokens.size());
    }
  }
  ASSERT_GT(tokens_seen, 0) << leader.ReadLog();
  auto spare =
      ChildProcess::Spawn({BinaryPath("splitspec-target-worker"), "--coordinator", endpoint,
                           "--name", "spare", "--model", model_path, "--threads", "1"},
                          dir + "/spare.log");
  ASSERT_TRUE(spare.ok());
  follower.Kill(SIGKILL);
  ASSERT_TRUE((*client)->Poll(absl::ZeroDuration()).ok());
  int unfinished_at_kill = 0;
  for (int i = 0; i < kRequests; ++i)
    unfinished_at_kill += !(*client)->Done(absl::StrCat("kill-", i));
  ASSERT_GT(unfinished_at_kill, 0)
      << "every request finished before the follower was killed: the test saw nothing";

  for (int i = 0; i < kRequests; ++i) {
    const std::string id = absl::StrCat("kill-", i);
    for (int attempt = 0; attempt < 12000 && !(*client)->Done(id); ++attempt) {
      ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
    }
    ASSERT_TRUE((*client)->Done(id)) << id << leader.ReadLog() << spare->ReadLog();
    const net::GenerationResult* got = &(*client)->Result(id);
    EXPECT_EQ(got->finish_reason, proto::FINISH_REASON_LENGTH) << id << " " << got->error;
    EXPECT_EQ(got->tokens, expected[i % Prompts().size()]) << id;
  }
  EXPECT_NE(leader.ReadLog().find("re-forming"), std::string::npos) << leader.ReadLog();

  // The follower comes back: the group re-forms and registers again.
  ChildProcess restarted = SpawnRank(dir, endpoint, model_path, 1, 1);
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        return CountAlive(s, "g0", 0) == 1 && CountAlive(s, "g0", 1) == 1;
      },
      1500, absl::Milliseconds(20), &status))
      << status.DebugString() << leader.ReadLog() << restarted.ReadLog();
  spare->Kill(SIGKILL);  // now only the re-formed group can serve
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        for (const proto::MemberStatus& m : s.members()) {
          if (m.worker_name() == "spare" && m.state() == proto::MEMBER_STATE_ALIVE) return false;
        }
        return true;
      },
      1500, absl::Milliseconds(20), &status))
      << status.DebugString();
  auto after = (*client)->Generate(GreedyRequest("after-reform", Prompts()[0], "none", kLongTokens),
                                   absl::Seconds(120));
  ASSERT_TRUE(after.ok()) << after.status() << leader.ReadLog() << restarted.ReadLog();
  EXPECT_EQ(after->tokens, expected[0]);
}

}  // namespace
}  // namespace splitspec::testing
