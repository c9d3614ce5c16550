// The "model" drafter on tiny random-weight GGUF models (tests/testing/tiny_model.h).
#include <unistd.h>

#include "runtime/spec/model_drafter.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/verify.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::spec {
namespace {

std::string WriteModel(uint32_t seed, const std::string& name) {
  model::TinyModelOptions options;
  options.seed = seed;
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name;
  EXPECT_TRUE(model::WriteTinyModel(options, path).ok());
  return path;
}

struct Loaded {
  std::unique_ptr<model::Transformer> model;
  std::unique_ptr<model::Tokenizer> tokenizer;
};

Loaded LoadModel(const std::string& path) {
  Loaded loaded;
  loaded.model = *model::Transformer::Load(path, {.threads = 1});
  loaded.tokenizer =
      std::make_unique<model::Tokenizer>(*model::LoadTokenizerFromGguf(loaded.model->file()));
  return loaded;
}

std::unique_ptr<ModelDrafter> MakeDrafter(const std::string& draft_path, const Loaded& target) {
  absl::StatusOr<std::unique_ptr<ModelDrafter>> drafter = ModelDrafter::Load(
      draft_path, *target.tokenizer, target.model->config().vocab_size, {.threads = 1});
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  return std::move(drafter).value();
}

// The logits after `context`, computed from scratch with a fresh cache.
std::vector<float> LastLogits(model::Transformer& m, const std::vector<int32_t>& context) {
  std::unique_ptr<model::KvCache> cache = m.NewCache();
  model::ForwardOutput out;
  EXPECT_TRUE(m.Forward({{cache.get(), context, model::LogitsMode::kLast}}, &out).ok());
  return std::vector<float>(out.Row(0, 0), out.Row(0, 0) + out.vocab_size);
}

// Greedy chain of `k` tokens after `context`, by the draft model alone.
std::vector<int32_t> ArgmaxChain(model::Transformer& m, std::vector<int32_t> context, int k) {
  std::vector<int32_t> chain;
  for (int i = 0; i < k; ++i) {
    const std::vector<float> logits = LastLogits(m, context);
    int32_t best = 0;
    for (int v = 1; v < static_cast<int>(logits.size()); ++v)
      best = logits[v] > logits[best] ? v : best;
    chain.push_back(best);
    context.push_back(best);
  }
  return chain;
}

// A greedy request of `k` draft tokens after `context` (borrowed).
DraftRequest GreedyRequest(const std::string& id, const std::vector<int32_t>& context, int k) {
  DraftRequest request;
  request.request_id = id;
  request.context = context;
  request.k = k;
  request.mode = VerifyMode::kGreedy;
  request.params.temperature = 0.0f;
  return request;
}

class ModelDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_path_ = WriteModel(1, "target.gguf");
    draft_path_ = WriteModel(2, "draft.gguf");
    target_ = LoadModel(target_path_);
    draft_ = LoadModel(draft_path_);
  }
  std::string target_path_, draft_path_;
  Loaded target_, draft_;
};

// A batch of ragged requests drafts exactly the draft model's own greedy chains,
// and after a rollback (Truncate + a correction) continues from the new context.
TEST_F(ModelDrafterTest, GreedyBatchDraftsTheDraftModelsChains) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 40, 9}, {300, 2}, {7, 7, 7, 7, 7, 100}};
  const std::vector<int> ks = {3, 0, 5};
  std::vector<DraftRequest> batch(3);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(drafter->Start("r" + std::to_string(r), prompts[r]).ok());
    batch[r].request_id = "r" + std::to_string(r);
    batch[r].context = prompts[r];
    batch[r].k = ks[r];
    batch[r].mode = VerifyMode::kGreedy;
    batch[r].params.temperature = 0.0f;
  }
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(batch[r].status.ok()) << batch[r].status;
    EXPECT_EQ(batch[r].tokens, ArgmaxChain(*draft_.model, prompts[r], ks[r])) << "request " << r;
    EXPECT_TRUE(batch[r].q.empty());
  }
  // Request 2: the target accepted 2 drafts and corrected the third to token 11.
  std::vector<int32_t> context = prompts[2];
  context.insert(context.end(), batch[2].tokens.begin(), batch[2].tokens.begin() + 2);
  ASSERT_TRUE(drafter->Truncate("r2", static_cast<int64_t>(context.size())).ok());
  context.push_back(11);
  std::vector<DraftRequest> again(1);
  again[0] = DraftRequest{};
  again[0].request_id = "r2";
  again[0].context = context;
  again[0].k = 4;
  again[0].mode = VerifyMode::kGreedy;
  again[0].params.temperature = 0.0f;
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(again)).ok());
  ASSERT_TRUE(again[0].status.ok()) << again[0].status;
  EXPECT_EQ(again[0].tokens, ArgmaxChain(*draft_.model, context, 4));
}

// The draft's q goes through the same logits pipeline as the target's p: each
// drafted position's row sees the prompt and the tokens drafted before it.
TEST_F(ModelDrafterTest, DraftsFollowTheRequestsLogitsProcessorsPositionByPosition) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  const std::vector<int32_t> prompt = {5, 17, 40, 9};
  constexpr int kDrafts = 5;
  const std::vector<int32_t> plain = ArgmaxChain(*draft_.model, prompt, kDrafts);
  DraftRequest request = GreedyRequest("p", prompt, kDrafts);
  request.prompt_length = static_cast<int>(prompt.size());
  request.params.logit_bias = {{plain[0], -100.0f}};
  request.params.frequency_penalty = 2.0f;
  request.params.repetition_penalty = 1.5f;
  // The reference: argmax of the pipeline's row after the prompt and the drafts so far.
  std::vector<int32_t> context = prompt, expected;
  for (int i = 0; i < kDrafts; ++i) {
    const std::vector<float> logits = LastLogits(*draft_.model, context);
    std::vector<float> p(logits.size());
    RowContext row;
    row.tokens = context;
    row.prompt_length = static_cast<int>(prompt.size());
    ASSERT_TRUE(ProcessRow(request.params, row, logits, absl::MakeSpan(p)).ok());
    expected.push_back(static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin()));
    context.push_back(expected.back());
  }
  ASSERT_NE(expected, plain) << "the processors must change the chain, or this proves nothing";
  ASSERT_TRUE(drafter->Start("p", prompt).ok());
  std::vector<DraftRequest> batch = {request};
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, expected);
}

// Under a KV budget that holds one request's cache at a time, two requests
// proposing in turn evict each other's caches and re-feed them: every proposal
// is still exactly the draft model's chain, and the caches never exceed the budget.
TEST_F(ModelDrafterTest, UnderAKvBudgetEvictedCachesAreRecomputedAndDraftsUnchanged) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  const uint64_t per_position = draft_.model->NewCache()->bytes_per_position();
  const uint64_t budget = 300 * per_position;  // one cache of 200 positions, not two
  drafter->SetKvBudget(budget);
  std::vector<std::vector<int32_t>> contexts(2);
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 100; ++i) contexts[r].push_back((i * 11 + r * 5 + 3) % 250);
    ASSERT_TRUE(drafter->Start("r" + std::to_string(r), contexts[r]).ok());
  }
  for (int round = 0; round < 6; ++round) {
    const int r = round % 2;
    std::vector<DraftRequest> batch = {GreedyRequest("r" + std::to_string(r), contexts[r], 3)};
    ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
    ASSERT_TRUE(batch[0].status.ok()) << "round " << round << ": " << batch[0].status;
    EXPECT_EQ(batch[0].tokens, ArgmaxChain(*draft_.model, contexts[r], 3)) << "round " << round;
    // The target accepted them all.
    contexts[r].insert(contexts[r].end(), batch[0].tokens.begin(), batch[0].tokens.end());
    EXPECT_LE(drafter->kv_budget()->used_bytes(), budget);
  }
  EXPECT_GT(drafter->kv_budget()->counters().preemptions, 0u);
  EXPECT_LE(drafter->kv_budget()->counters().peak_used_bytes, budget);
  drafter->Release("r0");
  drafter->Release("r1");
  EXPECT_EQ(drafter->kv_budget()->used_bytes(), 0u);
}

TEST_F(ModelDrafterTest, ARequestLargerThanTheKvBudgetFailsAloneNamingTheBudget) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  const uint64_t per_position = draft_.model->NewCache()->bytes_per_position();
  drafter->SetKvBudget(50 * per_position);
  std::vector<int32_t> context;
  for (int i = 0; i < 100; ++i) context.push_back(i + 3);
  ASSERT_TRUE(drafter->Start("big", context).ok());
  std::vector<DraftRequest> batch = {GreedyRequest("big", context, 2)};
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok())
      << "a request's problem, not the step's";
  EXPECT_TRUE(absl::IsResourceExhausted(batch[0].status)) << batch[0].status;
  EXPECT_NE(batch[0].status.message().find("KV cache budget of " +
                                           std::to_string(50 * per_position) + " bytes"),
            std::string::npos)
      << batch[0].status;
  EXPECT_TRUE(batch[0].tokens.empty());
  EXPECT_EQ(drafter->kv_budget()->used_bytes(), 0u);
}

// k = 0 takes the context in now (a draft worker catching up while speculation
// is off): all but its last token reach the cache in one forward, nothing is
// proposed, and the next Propose drafts exactly the draft model's own chain.
TEST_F(ModelDrafterTest, ProposingNothingFeedsThePendingContextToTheCache) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  std::vector<int32_t> context = {5, 17, 40};
  ASSERT_TRUE(drafter->Start("r", context).ok());
  EXPECT_EQ(drafter->CachedTokens("r"), 0) << "Start feeds nothing";
  for (int32_t t : {9, 300, 2, 7, 7, 100, 41, 8, 13}) context.push_back(t);
  std::vector<DraftRequest> catch_up = {GreedyRequest("r", context, 0)};
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(catch_up)).ok());
  ASSERT_TRUE(catch_up[0].status.ok()) << catch_up[0].status;
  EXPECT_TRUE(catch_up[0].tokens.empty());
  EXPECT_EQ(drafter->CachedTokens("r"), static_cast<int>(context.size()) - 1);
  std::vector<DraftRequest> draft = {GreedyRequest("r", context, 3)};
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(draft)).ok());
  ASSERT_TRUE(draft[0].status.ok()) << draft[0].status;
  EXPECT_EQ(draft[0].tokens, ArgmaxChain(*draft_.model, context, 3));
}

// Rejection mode ships, per token, the top-q_top_k renormalized distribution of
// the transformed draft logits, and the token lies in its support.
TEST_F(ModelDrafterTest, RejectionQIsTheTruncatedDraftDistribution) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  const std::vector<int32_t> prompt = {12, 99, 3};
  ASSERT_TRUE(drafter->Start("a", prompt).ok());
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "a";
  batch[0].context = prompt;
  batch[0].k = 4;
  batch[0].q_top_k = 8;
  batch[0].params.temperature = 0.8f;
  batch[0].params.top_p = 0.95f;
  batch[0].params.seed = 1234;
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  ASSERT_EQ(batch[0].tokens.size(), 4u);
  ASSERT_EQ(batch[0].q.size(), 4u);
  std::vector<int32_t> context = prompt;
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> logits = LastLogits(*draft_.model, context);
    std::vector<float> probs(logits.size());
    ASSERT_TRUE(LogitsToProbs(batch[0].params, logits, absl::MakeSpan(probs)).ok());
    const SparseDistribution want = *TopQDistribution(probs, 8);
    EXPECT_EQ(batch[0].q[i].token_ids, want.token_ids) << "i=" << i;
    EXPECT_EQ(batch[0].q[i].probs, want.probs) << "i=" << i;
    EXPECT_GT(batch[0].q[i].ProbabilityOf(batch[0].tokens[i]), 0.0f);
    context.push_back(batch[0].tokens[i]);
  }
}

// Drafting with the target's own weights in coupled mode: every block is
// accepted in full and the output equals target-only Gumbel-max decoding.
TEST_F(ModelDrafterTest, TargetAsItsOwnDraftIsAlwaysAcceptedInCoupledMode) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(target_path_, target_);
  SamplingParams params;
  params.temperature = 0.9f;
  params.seed = 77;
  const int vocab = target_.model->config().vocab_size;
  std::vector<int32_t> sequence = {4, 50, 61};
  const std::vector<int32_t> prompt = sequence;
  ASSERT_TRUE(drafter->Start("c", sequence).ok());
  std::vector<float> probs(vocab);
  for (int step = 0; step < 4; ++step) {
    std::vector<DraftRequest> batch(1);
    batch[0].request_id = "c";
    batch[0].context = sequence;
    batch[0].k = 3;
    batch[0].mode = VerifyMode::kCoupled;
    batch[0].params = params;
    ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
    ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
    // Target rows for positions frontier .. frontier + 3, one per prefix.
    std::vector<float> rows;
    std::vector<int32_t> prefix = sequence;
    for (int i = 0; i <= 3; ++i) {
      ASSERT_TRUE(
          LogitsToProbs(params, LastLogits(*target_.model, prefix), absl::MakeSpan(probs)).ok());
      rows.insert(rows.end(), probs.begin(), probs.end());
      if (i < 3) prefix.push_back(batch[0].tokens[i]);
    }
    VerifyRequest request;
    request.mode = VerifyMode::kCoupled;
    request.target_probs = rows;
    request.draft_tokens = batch[0].tokens;
    request.seed = params.seed;
    request.start_position = static_cast<int64_t>(sequence.size());
    const absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, vocab);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_EQ(outcome->accepted, 3) << "step " << step;
    sequence.insert(sequence.end(), outcome->committed.begin(), outcome->committed.end());
  }
  std::vector<int32_t> alone = prompt;
  while (alone.size() < sequence.size()) {
    ASSERT_TRUE(
        LogitsToProbs(params, LastLogits(*target_.model, alone), absl::MakeSpan(probs)).ok());
    alone.push_back(*ChooseTargetToken(VerifyMode::kCoupled, probs, params.seed,
                                       static_cast<int64_t>(alone.size())));
  }
  EXPECT_EQ(sequence, alone);
}

TEST_F(ModelDrafterTest, RefusesADraftWithADifferentVocabulary) {
  model::TinyModelOptions options;
  options.seed = 3;
  model::GgufWriter bos = model::MakeTinyModel(options);
  bos.SetUint32("tokenizer.ggml.bos_token_id", 1);
  const std::string bos_path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-draft_bos.gguf";
  ASSERT_TRUE(bos.WriteFile(bos_path).ok());
  absl::StatusOr<std::unique_ptr<ModelDrafter>> drafter =
      ModelDrafter::Load(bos_path, *target_.tokenizer, target_.model->config().vocab_size, {});
  ASSERT_FALSE(drafter.ok());
  EXPECT_EQ(drafter.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(drafter.status().message().find("BOS id is 1 in the draft, 0 in the target"),
            std::string::npos)
      << drafter.status();
  EXPECT_NE(drafter.status().message().find(bos_path), std::string::npos) << drafter.status();

  std::vector<std::string> tokens;
  for (int id = 0; id < target_.tokenizer->vocab_size(); ++id)
    tokens.push_back(target_.tokenizer->TokenText(id));
  tokens[1] = "<|im_begin|>";
  model::GgufWriter text = model::MakeTinyModel(options);
  text.SetStringArray("tokenizer.ggml.tokens", tokens);
  const std::string text_path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-draft_text.gguf";
  ASSERT_TRUE(text.WriteFile(text_path).ok());
  drafter =
      ModelDrafter::Load(text_path, *target_.tokenizer, target_.model->config().vocab_size, {});
  ASSERT_FALSE(drafter.ok());
  EXPECT_NE(drafter.status().message().find(
                "token 1 is '<|im_begin|>' in the draft, '<|im_start|>' in the target"),
            std::string::npos)
      << drafter.status();
}

TEST_F(ModelDrafterTest, EnforcesThePerRequestProtocol) {
  std::unique_ptr<ModelDrafter> drafter = MakeDrafter(draft_path_, target_);
  const std::vector<int32_t> prompt = {1, 2, 3};
  EXPECT_EQ(drafter->Start("x", {}).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int32_t> bad = {1, 100000};
  EXPECT_NE(drafter->Start("x", bad).message().find("100000"), std::string::npos);
  ASSERT_TRUE(drafter->Start("x", prompt).ok());
  EXPECT_EQ(drafter->Start("x", prompt).code(), absl::StatusCode::kAlreadyExists);
  std::vector<DraftRequest> batch(3);
  for (DraftRequest& r : batch) {
    r.request_id = "x";
    r.context = prompt;
    r.k = 2;
  }
  batch[2].request_id = "nobody";
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
  EXPECT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens.size(), 2u);
  EXPECT_NE(batch[1].status.message().find("twice"), std::string::npos) << batch[1].status;
  EXPECT_EQ(batch[2].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(drafter->Truncate("x", 6).code(), absl::StatusCode::kOutOfRange);  // holds 3 + 2
  EXPECT_TRUE(drafter->Truncate("x", 5).ok());
  drafter->Release("x");
  EXPECT_EQ(drafter->Truncate("x", 1).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace splitspec::spec
