// TargetEngine under a KV-cache budget (target_engine.h, "KV memory"):
// admission by prompt + reserve, the refusal of a request larger than the whole
// budget, eviction of the newest request when running sequences outgrow the
// budget, and recomputation that changes nothing committed. The accounting is
// the engine's own (kv_budget()): its peak never exceeds the budget.
//
// The fake model (one layer, kv_dim 1: 8 bytes per position as float32) makes
// the arithmetic visible; the tiny generated GGUF runs the real transformer, so
// "identical to an unconstrained run" is the real batch invariance at work.
#include <unistd.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "target_worker/target_engine.h"
#include "tests/testing/tiny_model.h"
#include "tests/unit/target_worker/engine_driver.h"
#include "tests/unit/target_worker/fake_language_model.h"

namespace splitspec::target {
namespace {

using testing::FakeLanguageModel;
using ::testing::HasSubstr;

proto::Assignment Assign(const std::string& id, const std::vector<int32_t>& prompt, int max_tokens,
                         uint64_t draft_worker = 0,
                         proto::VerifyMode mode = proto::VERIFY_MODE_GREEDY) {
  proto::Assignment a;
  a.set_request_id(id);
  a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
  a.set_draft_worker_id(draft_worker);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  if (mode != proto::VERIFY_MODE_GREEDY) {
    a.mutable_params()->set_temperature(1.0f);
    a.mutable_params()->set_seed(1000 + static_cast<uint64_t>(prompt.size()));
  }
  a.set_verify_mode(mode);
  return a;
}

std::vector<int32_t> Prompt(int length, int salt, int vocab) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back((i * 7 + salt * 13 + 1) % vocab);
  return prompt;
}

constexpr uint64_t kFakeBytesPerPosition = 4;  // 1 layer x (K, V) x 1 value x 2 bytes (half)

TEST(KvBudgetEngineTest, ARequestStartsOnlyWhenItsPromptPlusReserveFits) {
  FakeLanguageModel model;
  TargetEngineOptions options;
  options.kv_reserve_tokens = 16;
  // A prompt of 60 + the reserve of 16 reserves 76 positions, stored as 128 (whole
  // blocks of 64): room for one such reservation and a bit, not two.
  options.kv_cache_bytes = 200 * kFakeBytesPerPosition;
  TargetEngine engine(&model, options);
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(
        engine.AddRequest(Assign(id, Prompt(60, id[0], FakeLanguageModel::kVocab), 8)).ok());
  }
  EXPECT_EQ(engine.kv_waiting_requests(), 3) << "nothing starts before a step";
  std::vector<TargetEvent> events;
  ASSERT_TRUE(engine.Step(absl::Now(), &events).ok());
  EXPECT_EQ(engine.kv_waiting_requests(), 2) << "a's 128 positions fit, b's do not";
  EXPECT_EQ(engine.kv_budget().used_bytes(), 128 * kFakeBytesPerPosition);
  EXPECT_EQ(engine.kv_budget().counters().waits, 1u) << "b waited at the head of the queue";
  // Every request runs to its end, one after another, exactly as plain greedy.
  std::map<std::string, std::vector<int32_t>> seen;
  for (int step = 0; step < 500 && engine.HasWork(absl::Now()); ++step) {
    events.clear();
    ASSERT_TRUE(engine.Step(absl::Now(), &events).ok());
    for (const TargetEvent& e : events) {
      if (e.result.finished()) {
        seen[e.result.request_id()].assign(e.result.committed_tokens().begin(),
                                           e.result.committed_tokens().end());
      }
    }
  }
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(seen[id],
              FakeLanguageModel::GreedyExtend(Prompt(60, id[0], FakeLanguageModel::kVocab), 8))
        << id;
  }
  EXPECT_EQ(engine.kv_budget().counters().waits, 2u);
  EXPECT_EQ(engine.kv_budget().counters().preemptions, 0u);
  EXPECT_LE(engine.kv_budget().counters().peak_used_bytes, options.kv_cache_bytes);
  EXPECT_EQ(engine.kv_budget().used_bytes(), 0u) << "finished requests free their KV";
}

TEST(KvBudgetEngineTest, ARequestLargerThanTheWholeBudgetIsRefusedAtOnceNamingTheBudget) {
  FakeLanguageModel model(/*context_length=*/4096);
  TargetEngineOptions options;
  options.kv_cache_bytes = 1024 * kFakeBytesPerPosition;
  TargetEngine engine(&model, options);
  // 900 + 200 new tokens + a block's slack of 64 > 1024 positions.
  const absl::Status refused =
      engine.AddRequest(Assign("big", Prompt(900, 1, FakeLanguageModel::kVocab), 200));
  ASSERT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("request big needs up to 1164 KV cache positions (prompt 900 + "
                        "max_tokens 200"));
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("more than this target's whole KV cache budget of 4096 bytes"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--kv-cache-memory"));
  EXPECT_EQ(engine.kv_budget().counters().refused, 1u);
  EXPECT_EQ(engine.active_requests(), 0);
  // The same request with fewer new tokens fits.
  EXPECT_TRUE(
      engine.AddRequest(Assign("fits", Prompt(900, 1, FakeLanguageModel::kVocab), 30)).ok());
}

TEST(KvBudgetEngineTest, GrowthPastTheBudgetEvictsTheNewestWhichRecomputesExactly) {
  FakeLanguageModel model(/*context_length=*/1024);
  TargetEngineOptions options;
  options.kv_reserve_tokens = 0;  // start at the prompt: decoding must grow the caches
  options.prefill_chunk = 32;
  // Three prompts of 60 reserve 64 positions each (192); growing one to 128 needs
  // 64 more: 260 positions hold the three but not the growth.
  options.kv_cache_bytes = 260 * kFakeBytesPerPosition;
  TargetEngine engine(&model, options);
  std::vector<proto::Assignment> all;
  std::map<std::string, std::vector<int32_t>> oracles;
  for (int r = 0; r < 3; ++r) {
    const std::vector<int32_t> prompt = Prompt(60, r, FakeLanguageModel::kVocab);
    all.push_back(Assign("r" + std::to_string(r), prompt, 40, /*draft_worker=*/7));
    oracles["r" + std::to_string(r)] = FakeLanguageModel::GreedyExtend(prompt, 40);
  }
  const std::map<std::string, std::vector<int32_t>> seen =
      testing::DriveEngine(engine, all, oracles, FakeLanguageModel::kVocab);
  for (const auto& [id, truth] : oracles) EXPECT_EQ(seen.at(id), truth) << id;
  EXPECT_GT(engine.kv_budget().counters().preemptions, 0u);
  EXPECT_LE(engine.kv_budget().counters().peak_used_bytes, options.kv_cache_bytes);
}

// The tiny real model: more concurrent long requests than fit in a 1 MiB budget.
class KvBudgetTinyModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ =
        new std::string(::testing::TempDir() + "/kv-budget-" + std::to_string(getpid()) + ".gguf");
    model::TinyModelOptions options;
    options.n_heads = 4;
    options.n_kv_heads = 4;  // kv_dim 64: 2 layers x 2 x 64 x 4 bytes = 1 KiB per position
    options.context_length = 1024;
    ASSERT_TRUE(model::WriteTinyModel(options, *path_).ok());
  }
  static void TearDownTestSuite() {
    unlink(path_->c_str());
    delete path_;
  }

  static std::map<std::string, std::vector<int32_t>> Run(uint64_t kv_cache_bytes,
                                                         TargetEngine** engine_out = nullptr) {
    auto model = model::Transformer::Load(*path_, {.threads = 2});
    EXPECT_TRUE(model.ok()) << model.status();
    TargetEngineOptions options;
    options.kv_cache_bytes = kv_cache_bytes;
    options.kv_reserve_tokens = 16;  // small: running sequences grow past their reservations
    options.prefill_chunk = 128;
    static std::unique_ptr<model::Transformer> kept;
    static std::unique_ptr<TargetEngine> engine;
    kept = std::move(*model);
    engine = std::make_unique<TargetEngine>(kept.get(), options);
    const int vocab = kept->config().vocab_size;
    std::vector<proto::Assignment> all;
    std::map<std::string, std::vector<int32_t>> oracles;
    for (int r = 0; r < 8; ++r) {
      const std::string id = "req-" + std::to_string(r);
      const std::vector<int32_t> prompt = Prompt(300 + 10 * r, r, vocab);
      // Half greedy, half coupled sampling: both commit the same whatever the
      // schedule, the drafts or the batch (coupled: per-(seed, position) noise).
      all.push_back(Assign(id, prompt, 100, /*draft_worker=*/7,
                           r % 2 == 0 ? proto::VERIFY_MODE_GREEDY : proto::VERIFY_MODE_COUPLED));
      std::vector<int32_t> oracle = prompt;
      for (int i = 0; i < 120; ++i) oracle.push_back((oracle.back() * 5 + 3) % vocab);
      oracles[id] = oracle;
    }
    auto seen = testing::DriveEngine(*engine, all, oracles, vocab, /*max_steps=*/20000);
    if (engine_out != nullptr) *engine_out = engine.get();
    return seen;
  }

  static std::string* path_;
};

std::string* KvBudgetTinyModelTest::path_ = nullptr;

TEST_F(KvBudgetTinyModelTest, ManyLongRequestsUnderASmallBudgetCommitWhatAnUnconstrainedRunDoes) {
  const std::map<std::string, std::vector<int32_t>> free_run = Run(/*kv_cache_bytes=*/0);
  TargetEngine* engine = nullptr;
  const uint64_t budget = 1 << 20;  // 1 MiB: about two of these requests at a time
  const std::map<std::string, std::vector<int32_t>> tight_run = Run(budget, &engine);
  ASSERT_EQ(free_run.size(), 8u);
  for (const auto& [id, tokens] : free_run) {
    EXPECT_EQ(tokens.size(), tight_run.at(id).size()) << id;
    EXPECT_EQ(tokens, tight_run.at(id)) << id;
  }
  const model::KvBudgetCounters& kv = engine->kv_budget().counters();
  EXPECT_LE(kv.peak_used_bytes, budget);
  EXPECT_GT(kv.peak_used_bytes, budget / 2) << "the budget was used";
  EXPECT_GT(kv.waits, 0u);
  EXPECT_GT(kv.preemptions, 0u);
  EXPECT_EQ(engine->kv_budget().used_bytes(), 0u);
}

}  // namespace
}  // namespace splitspec::target
