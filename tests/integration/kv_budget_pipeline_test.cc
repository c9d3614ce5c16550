// The whole pipeline (coordinator, target and draft workers as threads) with
// small KV budgets on the tiny generated model: more concurrent long requests
// than the target's budget holds all complete with the plain-greedy output,
// the target counts waits and evictions (in its heartbeats, read back through
// the coordinator's status), the draft's accounting never exceeds its budget,
// and a request larger than the whole budget is refused at once, naming it.
// (That the target's peak stays within its budget is asserted from its own
// accounting in tests/unit/target_worker/kv_budget_engine_test.cc.)
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

using ::testing::HasSubstr;

constexpr int kMaxTokens = 40;

std::string WriteModel() {
  model::TinyModelOptions options;
  options.n_heads = 4;
  options.n_kv_heads = 4;  // 2 layers x (K, V) x 64 x 4 bytes = 1 KiB per position
  options.context_length = 1024;
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-kvb.gguf";
  EXPECT_TRUE(model::WriteTinyModel(options, path).ok());
  return path;
}

proto::SubmitRequest Greedy(const std::string& id, const std::vector<int32_t>& prompt,
                            int max_tokens = kMaxTokens) {
  proto::SubmitRequest submit;
  submit.set_request_id(id);
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.mutable_params()->set_temperature(0.0f);
  submit.mutable_params()->set_max_tokens(max_tokens);
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_draft_k(4);
  return submit;
}

std::vector<int32_t> LongPrompt(int length, int salt, int vocab) {
  std::vector<int32_t> prompt;
  // Repeats, so the lookup of a draft finds something to propose.
  for (int i = 0; i < length; ++i) prompt.push_back(((i % 37) * 7 + salt * 13 + 1) % vocab);
  return prompt;
}

TEST(KvBudgetPipelineTest, MoreLongRequestsThanTheBudgetHoldsAllCompleteExactly) {
  const std::string path = WriteModel();
  auto loaded = model::Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::unique_ptr<model::Transformer> target = *std::move(loaded);
  auto tokenizer = model::LoadTokenizerFromGguf(target->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // The draft: the target model itself, with a budget of its own too small for
  // every request's cache (its evictions and resyncs must not change a token).
  auto spec = spec::ParseDrafterSpec("model", path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto drafter = spec::MakeDrafter(*spec, path, &*tokenizer, target->config().vocab_size, 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  auto* model_drafter = dynamic_cast<spec::ModelDrafter*>(drafter->get());
  ASSERT_NE(model_drafter, nullptr);
  // Budgets in positions of this model's caches (bytes per position: half-precision K and V).
  const uint64_t per_position = target->NewCache()->bytes_per_position();
  model_drafter->SetKvBudget(1200 * per_position);

  // 800 positions: two of these requests start (about 330 positions each), but
  // they cannot both grow to their longest (about 430): the newer is evicted.
  const uint64_t budget = 800 * per_position;
  tools::InProcessClusterOptions options;
  options.target = target.get();
  options.drafter = drafter->get();
  options.target_engine.kv_cache_bytes = budget;
  options.target_engine.kv_reserve_tokens = 8;  // running requests must grow: evictions
  options.membership.heartbeat_interval = absl::Milliseconds(20);
  auto cluster = tools::InProcessCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  ASSERT_TRUE(client.ok()) << client.status();

  const int vocab = target->config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int r = 0; r < 6; ++r) {
    prompts.push_back(LongPrompt(320 + 8 * r, r, vocab));
    ASSERT_TRUE((*client)->Submit(Greedy("long-" + std::to_string(r), prompts.back())).ok());
  }
  // A request that could never fit: refused at once, naming the budget.
  ASSERT_TRUE((*client)->Submit(Greedy("huge", LongPrompt(900, 9, vocab), 100)).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(240);
  auto all_done = [&] {
    for (int r = 0; r < 6; ++r) {
      if (!(*client)->Done("long-" + std::to_string(r))) return false;
    }
    return (*client)->Done("huge");
  };
  while (!all_done() && absl::Now() < deadline) {
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(50)).ok());
  }
  ASSERT_TRUE(all_done()) << "the requests did not finish in time";
  const net::GenerationResult& huge = (*client)->Result("huge");
  EXPECT_EQ(huge.finish_reason, proto::FINISH_REASON_ERROR);
  EXPECT_THAT(huge.error, HasSubstr(absl::StrCat("whole KV cache budget of ", budget, " bytes")));
  EXPECT_TRUE(huge.tokens.empty());
  for (int r = 0; r < 6; ++r) {
    const net::GenerationResult& got = (*client)->Result("long-" + std::to_string(r));
    EXPECT_TRUE(got.error.empty()) << got.error;
    EXPECT_EQ(got.finish_reason, proto::FINISH_REASON_LENGTH) << r;
    EXPECT_EQ(got.tokens, testing::PlainGreedy(*target, prompts[r], kMaxTokens)) << "request " << r;
  }
  // The target's own accounting, from its heartbeats (the gauges of /metrics).
  bool seen = false;
  for (int tries = 0; tries < 100 && !seen; ++tries) {
    auto status = net::FetchCoordinatorStatus((*cluster)->coordinator_endpoint(), absl::Seconds(5));
    ASSERT_TRUE(status.ok()) << status.status();
    for (const proto::MemberStatus& m : status->members()) {
      if (m.role() != proto::ROLE_TARGET_WORKER || m.load().kv_cache_used_bytes() != 0) continue;
      if (m.load().kv_cache_preemptions() == 0) continue;  // an older heartbeat
      seen = true;
      EXPECT_EQ(m.load().kv_cache_budget_bytes(), budget);
      EXPECT_EQ(m.load().kv_cache_bytes_per_position(), per_position);
      EXPECT_GT(m.load().kv_cache_waits(), 0u);
      EXPECT_GT(m.load().kv_cache_preemptions(), 0u);
    }
    if (!seen) absl::SleepFor(absl::Milliseconds(30));
  }
  EXPECT_TRUE(seen) << "no heartbeat reported the target's waits and evictions";
  (*cluster)->KillDraftWorker();
  EXPECT_LE(model_drafter->kv_budget()->counters().peak_used_bytes, 1200u * 1024);
}

}  // namespace
}  // namespace splitspec
