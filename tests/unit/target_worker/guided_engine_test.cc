// TargetEngine under classifier-free guidance, over the deterministic fake model:
// the conditional sequence and its unconditional companion are fed in the same
// forwards (never half a pair after the prompts, the budget counting both), both
// caches roll back together on rejection, releasing stops both, a re-placed
// request re-prefills both, and greedy guided speculation commits exactly what
// greedy guided decoding of the target alone commits.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/base/status_macros.h"
#include "target_worker/target_engine.h"
#include "tests/unit/target_worker/fake_language_model.h"

namespace splitspec::target {
namespace {

using testing::FakeLanguageModel;

constexpr uint64_t kDraftWorker = 7;
// The fake's logits make any scale >= 1 follow the conditional argmax; at 0.5 both
// sequences decide the token, so a stale or misfed companion changes the output.
constexpr float kScale = 0.5f;

// What greedy guided decoding of the fake model commits after `prompt`, with
// `negative` as the unconditional prompt: argmax of l_u + s * (l_c - l_u).
std::vector<int32_t> GuidedGreedyExtend(std::vector<int32_t> prompt,
                                        std::vector<int32_t> negative, float scale, int n) {
  for (int i = 0; i < n; ++i) {
    const std::vector<float> c = FakeLanguageModel::Logits(prompt);
    const std::vector<float> u = FakeLanguageModel::Logits(negative);
    int32_t best = 0;
    double best_logit = -INFINITY;
    for (int v = 0; v < FakeLanguageModel::kVocab; ++v) {
      const double g = u[v] + static_cast<double>(scale) * (c[v] - u[v]);
      if (g > best_logit) {
        best_logit = g;
        best = v;
      }
    }
    prompt.push_back(best);
    negative.push_back(best);
  }
  return prompt;
}

proto::Assignment GuidedAssign(const std::string& id, const std::vector<int32_t>& committed,
                               int prompt_length, const std::vector<int32_t>& negative,
                               int max_tokens, uint64_t draft_worker, float scale = kScale) {
  proto::Assignment a;
  a.set_request_id(id);
  a.mutable_committed_tokens()->Assign(committed.begin(), committed.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt_length));
  a.set_draft_worker_id(draft_worker);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  a.mutable_params()->set_temperature(0.0f);
  a.mutable_params()->set_guidance_scale(scale);
  a.mutable_params()->mutable_negative_prompt_tokens()->Assign(negative.begin(), negative.end());
  a.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  return a;
}

proto::DraftBlock Block(const std::string& id, uint64_t epoch, int start,
                        const std::vector<int32_t>& tokens, uint64_t sequence) {
  proto::DraftBlock b;
  b.set_request_id(id);
  b.set_epoch(epoch);
  b.set_start(static_cast<uint32_t>(start));
  b.set_block_sequence(sequence);
  b.mutable_tokens()->Assign(tokens.begin(), tokens.end());
  return b;
}

class GuidedEngineTest : public ::testing::Test {
 protected:
  void Make(int budget = 16, int prefill_chunk = 4) {
    TargetEngineOptions options;
    options.step_token_budget = budget;
    options.prefill_chunk = prefill_chunk;
    options.block_wait = absl::Hours(1);
    engine_ = std::make_unique<TargetEngine>(&model_, options);
  }

  absl::Status Add(const proto::Assignment& a) {
    seen_[a.request_id()].assign(a.committed_tokens().begin(), a.committed_tokens().end());
    RETURN_IF_ERROR(engine_->AddRequest(a));
    const TargetRequest* request = engine_->Find(a.request_id());
    if (request->guided()) pairs_[&request->cache()] = &request->companion_cache();
    return absl::OkStatus();
  }

  // One step; results update seen_; new results are answered by `answer` (the draft).
  absl::Status Step() {
    events_.clear();
    const absl::Status status = engine_->Step(now_, &events_);
    for (const TargetEvent& e : events_) {
      if (!e.to_coordinator) continue;
      std::vector<int32_t>& seen = seen_[e.result.request_id()];
      const std::vector<int32_t> tokens(e.result.committed_tokens().begin(),
                                        e.result.committed_tokens().end());
      if (e.result.finished()) {
        companion_reported_[e.result.request_id()] = e.result.stats().companion_forward_tokens();
      }
      if (e.result.full_sequence()) {
        seen = tokens;
      } else {
        seen.insert(seen.end(), tokens.begin(), tokens.end());
      }
    }
    return status;
  }

  // Every recorded forward: a pair's decode feeds (logits wanted) come together
  // with the same block tokens, prompt chunks of a pair run in the same forward
  // while both have prompt left, and no forward exceeds the budget.
  void ExpectNeverHalfAPair(int budget) const {
    for (size_t f = 0; f < model_.forwards().size(); ++f) {
      std::map<const model::KvCache*, FakeLanguageModel::FedSequence> fed;
      int tokens = 0;
      for (const auto& s : model_.forwards()[f]) {
        fed[s.cache] = s;
        tokens += static_cast<int>(s.tokens.size());
      }
      EXPECT_LE(tokens, budget) << "forward " << f;
      for (const auto& [cond, uncond] : pairs_) {
        const bool has_cond = fed.contains(cond), has_uncond = fed.contains(uncond);
        const bool decode = (has_cond && fed[cond].logits != model::LogitsMode::kNone) ||
                            (has_uncond && fed[uncond].logits != model::LogitsMode::kNone);
        if (!decode) continue;
        ASSERT_TRUE(has_cond && has_uncond) << "forward " << f << " ran half a pair";
        const auto& c = fed[cond].tokens;
        const auto& u = fed[uncond].tokens;
        ASSERT_EQ(c.size(), u.size()) << "forward " << f;
        EXPECT_TRUE(std::equal(c.begin() + 1, c.end(), u.begin() + 1))
            << "forward " << f << ": the pair was fed different blocks";
      }
    }
  }

  FakeLanguageModel model_;
  std::unique_ptr<TargetEngine> engine_;
  absl::Time now_ = absl::Now();
  std::vector<TargetEvent> events_;
  std::map<std::string, std::vector<int32_t>> seen_;
  std::map<const model::KvCache*, const model::KvCache*> pairs_;  // cond -> companion
  std::map<std::string, uint64_t> companion_reported_;  // final SpecStats per request
};

TEST_F(GuidedEngineTest, GreedyGuidedSpeculationCommitsExactlyGreedyGuidedPlain) {
  Make(/*budget=*/16, /*prefill_chunk=*/4);
  struct Case {
    std::vector<int32_t> prompt, negative;
    uint64_t draft;
  };
  // Negative prompts shorter and longer than the prompt (prefills of unequal
  // length), BOS alone, and one request without a draft worker.
  const std::map<std::string, Case> cases = {
      {"a", {{1, 2, 3}, {0}, kDraftWorker}},
      {"b", {{30, 1, 17, 4, 4, 9, 2}, {0, 11}, kDraftWorker}},
      {"c", {{8}, {0, 5, 6, 7, 12, 13, 9, 21, 2}, kDraftWorker}},
      {"d", {{9, 9}, {0, 4}, 0}}};
  const int kNew = 24;
  std::map<std::string, std::vector<int32_t>> truth;
  for (const auto& [id, c] : cases) {
    truth[id] = GuidedGreedyExtend(c.prompt, c.negative, kScale, kNew + 8);
    ASSERT_NE(truth[id], FakeLanguageModel::GreedyExtend(c.prompt, kNew + 8))
        << id << ": guidance must change the output, or this test proves nothing";
    const int length = static_cast<int>(c.prompt.size());
    ASSERT_TRUE(Add(GuidedAssign(id, c.prompt, length, c.negative, kNew, c.draft)).ok());
  }
  int pattern = 0;
  uint64_t sequence = 0;
  auto propose = [&](const std::string& id, uint64_t epoch, int frontier) {
    const int kind = pattern++ % 5;
    const int k = kind == 3 ? 0 : 3 + kind % 2;
    std::vector<int32_t> tokens(truth[id].begin() + frontier, truth[id].begin() + frontier + k);
    if (kind == 1 || kind == 2) tokens[kind == 1 ? 0 : 2] = (tokens[kind == 1 ? 0 : 2] + 5) % 32;
    EXPECT_EQ(engine_->AddBlock(Block(id, epoch, frontier, tokens, ++sequence), "d"),
              BlockAdmission::kQueued);
  };
  for (const auto& [id, c] : cases) {
    if (c.draft != 0) propose(id, 0, static_cast<int>(c.prompt.size()));
  }
  for (int i = 0; i < 400 && engine_->HasWork(now_); ++i) {
    ASSERT_TRUE(Step().ok());
    for (const TargetEvent& e : events_) {
      if (e.draft_peer.empty() || e.result.finished()) continue;
      propose(e.result.request_id(), e.result.epoch(), static_cast<int>(e.result.frontier()));
    }
  }
  EXPECT_EQ(engine_->active_requests(), 0);
  for (const auto& [id, c] : cases) {
    const std::vector<int32_t> want(truth[id].begin(), truth[id].begin() + c.prompt.size() + kNew);
    EXPECT_EQ(seen_[id], want) << id;
  }
  EXPECT_EQ(engine_->counters().malformed_blocks, 0u);
  EXPECT_EQ(engine_->counters().guided_requests, 4u);
  EXPECT_GT(engine_->counters().companion_forward_tokens, 4u * kNew);
  // Each request's final report carries its own share of those tokens.
  uint64_t reported = 0;
  for (const auto& [id, tokens] : companion_reported_) reported += tokens;
  EXPECT_EQ(reported, engine_->counters().companion_forward_tokens);
  ExpectNeverHalfAPair(16);
}

TEST_F(GuidedEngineTest, ReleasingAGuidedRequestStopsBothSequences) {
  Make();
  ASSERT_TRUE(Add(GuidedAssign("r", {1, 2, 3}, 3, {0, 4}, 50, 0)).ok());
  ASSERT_TRUE(Add(GuidedAssign("s", {5, 6}, 2, {0}, 50, 0)).ok());
  const auto [r_cond, r_uncond] = *pairs_.find(&engine_->Find("r")->cache());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Step().ok());
  engine_->Release("r");
  const size_t before = model_.forwards().size();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Step().ok());
  ASSERT_GT(model_.forwards().size(), before) << "the other request must keep running";
  for (size_t f = before; f < model_.forwards().size(); ++f) {
    for (const auto& s : model_.forwards()[f]) {
      EXPECT_NE(s.cache, r_cond);
      EXPECT_NE(s.cache, r_uncond);
    }
  }
}

// A target worker died: the coordinator re-places the request elsewhere with the
// committed tokens so far. The new engine re-prefills both sequences (the
// companion from the negative prompt plus the generated tokens) and continues
// exactly where guided decoding would.
TEST_F(GuidedEngineTest, RePlacedRequestRePrefillsBothAndContinuesExactly) {
  Make();
  const std::vector<int32_t> prompt = {30, 1, 17}, negative = {0, 11, 12, 13};
  const std::vector<int32_t> truth = GuidedGreedyExtend(prompt, negative, kScale, 16);
  const std::vector<int32_t> so_far(truth.begin(), truth.begin() + prompt.size() + 6);
  ASSERT_TRUE(Add(GuidedAssign("r", so_far, 3, negative, 16, 0)).ok());
  const TargetRequest* request = engine_->Find("r");
  EXPECT_EQ(request->companion_frontier(), static_cast<int>(negative.size()) + 6);
  for (int i = 0; i < 100 && engine_->HasWork(now_); ++i) ASSERT_TRUE(Step().ok());
  EXPECT_EQ(seen_["r"], truth);
  ExpectNeverHalfAPair(16);
  // The companion was prefilled with exactly its own sequence.
  std::vector<int32_t> companion_fed;
  for (const auto& forward : model_.forwards()) {
    for (const auto& s : forward) {
      if (s.cache == pairs_.begin()->second && s.logits == model::LogitsMode::kNone) {
        companion_fed.insert(companion_fed.end(), s.tokens.begin(), s.tokens.end());
      }
    }
  }
  std::vector<int32_t> want = negative;
  want.insert(want.end(), truth.begin() + prompt.size(), truth.begin() + prompt.size() + 5);
  EXPECT_EQ(companion_fed, want) << "all but the companion's last token, in prefill chunks";
}

TEST_F(GuidedEngineTest, ScaleOneRunsNoCompanionAndMatchesAnUnguidedRequest) {
  Make();
  proto::Assignment guided = GuidedAssign("g", {3, 1, 4}, 3, {0}, 10, 0, /*scale=*/1.0f);
  guided.mutable_params()->set_temperature(1.0f);
  guided.mutable_params()->set_seed(99);
  guided.set_verify_mode(proto::VERIFY_MODE_REJECTION);
  proto::Assignment plain = guided;
  plain.set_request_id("p");
  plain.mutable_params()->clear_guidance_scale();
  plain.mutable_params()->clear_negative_prompt_tokens();
  ASSERT_TRUE(Add(guided).ok());
  ASSERT_TRUE(Add(plain).ok());
  EXPECT_FALSE(engine_->Find("g")->guided());
  for (int i = 0; i < 100 && engine_->HasWork(now_); ++i) ASSERT_TRUE(Step().ok());
  EXPECT_EQ(seen_["g"], seen_["p"]);
  EXPECT_EQ(seen_["g"].size(), 13u);
  EXPECT_EQ(engine_->counters().companion_forward_tokens, 0u);
}

TEST_F(GuidedEngineTest, RefusesGuidedRequestsWithoutOrWithBadNegativePrompt) {
  Make();
  absl::Status status = engine_->AddRequest(GuidedAssign("r", {1, 2}, 2, {}, 5, 0));
  EXPECT_NE(status.message().find("negative_prompt_tokens is empty"), std::string::npos)
      << status;
  status = engine_->AddRequest(GuidedAssign("r", {1, 2}, 2, {0, 99}, 5, 0));
  EXPECT_NE(status.message().find("negative_prompt_tokens[1] = 99"), std::string::npos)
      << status;
  status = engine_->AddRequest(GuidedAssign("r", {1, 2}, 2, {0}, 5, 0, /*scale=*/-1.0f));
  EXPECT_NE(status.message().find("guidance_scale"), std::string::npos) << status;
  EXPECT_EQ(engine_->active_requests(), 0);
}

}  // namespace
}  // namespace splitspec::target
