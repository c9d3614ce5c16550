// The cross-vocabulary drafter on tiny GGUF models whose vocabularies differ (a
// byte-level BPE target, a SentencePiece draft with shared single characters,
// draft-only multi-character tokens and target-only ones: cross_vocab_test_util.h),
// verified block by block against the target as the target worker verifies
// (VerifyBlock on the target's rows):
// - the output law under token-level intersection and under string mapping is the
//   target's (chi-square at significance 1e-3), and the same test rejects a
//   deliberately wrong mapping;
// - greedy speculative output equals the target's greedy output, drafts accepted,
//   under intersection and string mapping alike;
// - the draft's tokens always spell the held text (its incremental tokenization).
#include <unistd.h>

#include "runtime/spec/cross_vocab_drafter.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/verify.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/chi_square.h"
#include "tests/testing/tiny_model.h"
#include "tests/unit/spec/cross_vocab_test_util.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

struct Loaded {
  std::unique_ptr<model::Transformer> model;
  std::unique_ptr<model::Tokenizer> tokenizer;
};

Loaded LoadModel(const std::string& path) {
  Loaded loaded;
  absl::StatusOr<std::unique_ptr<model::Transformer>> m =
      model::Transformer::Load(path, {.threads = 1});
  EXPECT_TRUE(m.ok()) << m.status();
  loaded.model = *std::move(m);
  absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(loaded.model->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  loaded.tokenizer = std::make_unique<model::Tokenizer>(*std::move(tokenizer));
  return loaded;
}

// The logits after `context`, computed from scratch.
std::vector<float> LastLogits(model::Transformer& m, const std::vector<int32_t>& context) {
  std::unique_ptr<model::KvCache> cache = m.NewCache();
  model::ForwardOutput out;
  EXPECT_TRUE(m.Forward({{cache.get(), context, model::LogitsMode::kLast}}, &out).ok());
  return std::vector<float>(out.Row(0, 0), out.Row(0, 0) + out.vocab_size);
}

// The target's p after `context` (the whole pipeline: the request's logit_bias too).
std::vector<float> TargetProbs(model::Transformer& target, const SamplingParams& params,
                               const std::vector<int32_t>& context) {
  const std::vector<float> logits = LastLogits(target, context);
  std::vector<float> probs(logits.size());
  EXPECT_TRUE(ProcessRow(params, {.tokens = context, .prompt_length = 0, .allowed = {}}, logits,
                         absl::MakeSpan(probs))
                  .ok());
  return probs;
}

struct SpecRun {
  std::vector<int32_t> tokens;  // generated, at least the n asked
  int drafted = 0;
  int accepted = 0;
};

// Speculative generation of >= n tokens after `prompt`: each step drafts k
// tokens, verifies them on the target's rows with VerifyBlock (the target
// worker's rule), and rolls the drafter back to what was accepted. `corrupt`, if
// set, changes each shipped block before verification (a wrong mapping).
SpecRun RunSpec(Drafter& drafter, model::Transformer& target, const std::vector<int32_t>& prompt,
                int n, VerifyMode mode, const SamplingParams& params, int k,
                const std::function<void(DraftRequest&)>& corrupt = nullptr) {
  SpecRun run;
  const std::string id = "r";
  EXPECT_TRUE(drafter.Start(id, prompt).ok());
  std::vector<int32_t> sequence = prompt;
  const int vocab = target.config().vocab_size;
  while (sequence.size() < prompt.size() + static_cast<size_t>(n)) {
    std::vector<DraftRequest> batch(1);
    DraftRequest& r = batch[0];
    r.request_id = id;
    r.context = sequence;
    r.k = k;
    r.mode = mode;
    r.params = params;
    r.prompt_length = static_cast<int>(prompt.size());
    absl::Status status = drafter.Propose(absl::MakeSpan(batch));
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE(r.status.ok()) << r.status;
    if (!status.ok() || !r.status.ok()) break;
    if (corrupt) corrupt(r);
    std::vector<float> rows;
    std::vector<int32_t> prefix = sequence;
    for (size_t i = 0; i <= r.tokens.size(); ++i) {
      const std::vector<float> p = TargetProbs(target, params, prefix);
      rows.insert(rows.end(), p.begin(), p.end());
      if (i < r.tokens.size()) prefix.push_back(r.tokens[i]);
    }
    VerifyRequest request;
    request.mode = mode;
    request.target_probs = rows;
    request.draft_tokens = r.tokens;
    if (mode == VerifyMode::kRejection) request.draft_q_sparse = r.q;
    request.seed = params.seed;
    request.start_position = static_cast<int64_t>(sequence.size());
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, vocab);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    if (!outcome.ok()) break;
    run.drafted += static_cast<int>(r.tokens.size());
    run.accepted += outcome->accepted;
    const size_t frontier = sequence.size();
    EXPECT_TRUE(drafter.Truncate(id, static_cast<int64_t>(frontier + outcome->accepted)).ok());
    sequence.insert(sequence.end(), outcome->committed.begin(), outcome->committed.end());
  }
  drafter.Release(id);
  run.tokens.assign(sequence.begin() + static_cast<std::ptrdiff_t>(prompt.size()), sequence.end());
  return run;
}

class CrossVocabDrafterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = ::testing::TempDir() + "/" + std::to_string(::getpid());
    target_path_ = new std::string(dir + "-cross-target.gguf");
    draft_path_ = new std::string(dir + "-cross-draft.gguf");
    model::TinyModelOptions options;
    options.seed = 1;
    ASSERT_TRUE(model::WriteTinyModel(options, *target_path_).ok());
    ASSERT_TRUE(testing::MakeSentencePieceDraft(1, 3).WriteFile(*draft_path_).ok());
  }
  static void TearDownTestSuite() {
    delete target_path_;
    delete draft_path_;
  }
  void SetUp() override { target_ = LoadModel(*target_path_); }

  std::unique_ptr<CrossVocabDrafter> MakeCross(VocabMapping mapping) {
    CrossVocabDrafterOptions options;
    options.mapping = mapping;
    options.model.threads = 1;
    absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> drafter =
        CrossVocabDrafter::Load(*draft_path_, target_.tokenizer.get(), options);
    EXPECT_TRUE(drafter.ok()) << drafter.status();
    return drafter.ok() ? *std::move(drafter) : nullptr;
  }

  std::vector<int32_t> Prompt(const std::string& text) const {
    return target_.tokenizer->Encode(text, {.add_special = false});
  }

  // Drafts, keeps some, corrects, and checks the draft's tokens against the text.
  void CheckDraftTokensSpellTheHeldText(VocabMapping mapping);

  static std::string* target_path_;
  static std::string* draft_path_;
  Loaded target_;
};
std::string* CrossVocabDrafterTest::target_path_ = nullptr;
std::string* CrossVocabDrafterTest::draft_path_ = nullptr;

std::vector<int32_t> GreedyChain(model::Transformer& target, const SamplingParams& params,
                                 std::vector<int32_t> context, int n) {
  std::vector<int32_t> chain;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> p = TargetProbs(target, params, context);
    const int32_t best = static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
    chain.push_back(best);
    context.push_back(best);
  }
  return chain;
}

TEST_F(CrossVocabDrafterTest, DescribesTheVocabulariesAndTheMapping) {
  std::unique_ptr<CrossVocabDrafter> drafter = MakeCross(VocabMapping::kAuto);
  ASSERT_NE(drafter, nullptr);
  const std::string line = drafter->Describe();
  EXPECT_NE(line.find("vocab mapping auto (intersection under rejection verification, string "
                      "under greedy and coupled)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(absl::StrCat("draft tokens shared")), std::string::npos) << line;
  EXPECT_EQ(drafter->name(), "model");
}

TEST_F(CrossVocabDrafterTest, GreedyOutputIsTheTargetsUnderEitherMapping) {
  const std::vector<int32_t> prompt = Prompt("the in on the er at");
  // The random model's favourite is a lone UTF-8 lead byte, which the draft waits on
  // (a text ending inside a character): a logit_bias (applied to both, mapped to the
  // draft's ids) keeps the target's greedy text to ASCII.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int byte = 0x80; byte < 0x100; ++byte) greedy.logit_bias.emplace_back(3 + byte, -100.0f);
  const std::vector<int32_t> plain = GreedyChain(*target_.model, greedy, prompt, 24);

  for (VocabMapping mapping : {VocabMapping::kString, VocabMapping::kIntersection}) {
    for (int k : {1, 4}) {
      std::unique_ptr<CrossVocabDrafter> drafter = MakeCross(mapping);
      ASSERT_NE(drafter, nullptr);
      const SpecRun run =
          RunSpec(*drafter, *target_.model, prompt, 24, VerifyMode::kGreedy, greedy, k);
      ASSERT_GE(run.tokens.size(), plain.size());
      EXPECT_EQ(std::vector<int32_t>(run.tokens.begin(), run.tokens.begin() + 24), plain)
          << VocabMappingName(mapping) << " k=" << k;
      std::printf("greedy %s k=%d: %d of %d drafts accepted\n",
                  std::string(VocabMappingName(mapping)).c_str(), k, run.accepted, run.drafted);
      EXPECT_GT(run.accepted, 0) << VocabMappingName(mapping) << " k=" << k;
    }
  }
}

TEST_F(CrossVocabDrafterTest, DraftTokensSpellTheHeldTextAfterRollbacks) {
  for (VocabMapping mapping : {VocabMapping::kIntersection, VocabMapping::kString}) {
    SCOPED_TRACE(VocabMappingName(mapping));
    CheckDraftTokensSpellTheHeldText(mapping);
  }
}

void CrossVocabDrafterTest::CheckDraftTokensSpellTheHeldText(VocabMapping mapping) {
  std::unique_ptr<CrossVocabDrafter> drafter = MakeCross(mapping);
  ASSERT_NE(drafter, nullptr);
  const model::Tokenizer draft_tokenizer =
      *model::LoadTokenizerFromGguf(drafter->inner().draft_model().file());
  std::vector<int32_t> sequence = Prompt("the in on");
  ASSERT_TRUE(drafter->Start("a", sequence).ok());
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 5;
  for (int step = 0; step < 12; ++step) {
    std::vector<DraftRequest> batch(1);
    batch[0].request_id = "a";
    batch[0].context = sequence;
    batch[0].k = 3;
    batch[0].params = params;
    ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
    ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
    ASSERT_EQ(batch[0].q.size(), batch[0].tokens.size());
    for (size_t i = 0; i < batch[0].tokens.size(); ++i) {
      EXPECT_TRUE(batch[0].q[i].Validate(target_.tokenizer->vocab_size()).ok());
      if (mapping == VocabMapping::kString) {
        EXPECT_EQ(batch[0].q[i].token_ids.size(), 1u);
      }
      EXPECT_GT(batch[0].q[i].ProbabilityOf(batch[0].tokens[i]), 0.0f);
    }
    // Keep step % 3 of them, then a token of the test's choosing (a "correction").
    const size_t keep = std::min<size_t>(step % 3, batch[0].tokens.size());
    sequence.insert(sequence.end(), batch[0].tokens.begin(), batch[0].tokens.begin() + keep);
    ASSERT_TRUE(drafter->Truncate("a", static_cast<int64_t>(sequence.size())).ok());
    sequence.push_back(Prompt(step % 2 == 0 ? " the" : "in")[0]);
    // Feed it (k = 0) and compare the draft's tokens with the held text.
    batch[0].context = sequence;
    batch[0].k = 0;
    ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
    ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
    const std::vector<int32_t> draft_tokens = drafter->DraftTokens("a");
    ASSERT_FALSE(draft_tokens.empty());
    EXPECT_EQ(draft_tokens[0], draft_tokenizer.bos_id());
    EXPECT_EQ(*draft_tokenizer.Decode(draft_tokens), *target_.tokenizer->Decode(sequence))
        << "step " << step;
  }
}

TEST_F(CrossVocabDrafterTest, RefusesBadRequestsByName) {
  std::unique_ptr<CrossVocabDrafter> drafter = MakeCross(VocabMapping::kAuto);
  ASSERT_NE(drafter, nullptr);
  EXPECT_EQ(drafter->Start("x", {}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status outside = drafter->Start("x", {5, 100000});
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.message().find("token 1 is 100000, outside the target's vocabulary"),
            std::string::npos)
      << outside;
  ASSERT_TRUE(drafter->Start("x", {50, 61}).ok());
  EXPECT_EQ(drafter->Start("x", {50}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(drafter->Truncate("x", 3).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(drafter->Truncate("y", 0).code(), absl::StatusCode::kNotFound);
  std::vector<int32_t> short_context = {50};
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "x";
  batch[0].context = short_context;
  batch[0].k = 2;
  ASSERT_TRUE(drafter->Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].status.code(), absl::StatusCode::kFailedPrecondition) << batch[0].status;
}

// The law of the first two generated tokens: the target's exact p(x1) p(x2 | x1)
// (top-6 sampling keeps it at 36 cells) against speculative samples drafted by
// the SentencePiece draft under intersection, verified by rejection.
class CrossVocabDistributionTest : public CrossVocabDrafterTest {
 protected:
  // Chi-square p-value of `samples` continuations, each corrupted by `corrupt`.
  double ContinuationPValue(const std::string& name, VocabMapping mapping,
                            const std::function<void(DraftRequest&)>& corrupt, int samples) {
    const std::vector<int32_t> prompt = Prompt("the in on");
    SamplingParams params;
    params.temperature = 1.0f;
    params.top_k = 6;
    const std::vector<float> p1 = TargetProbs(*target_.model, params, prompt);
    std::vector<int32_t> support;
    for (int v = 0; v < static_cast<int>(p1.size()); ++v)
      if (p1[v] > 0.0f) support.push_back(v);
    EXPECT_EQ(support.size(), 6u);
    // cell (i, j) = (support[i], j-th token of x1's support).
    std::vector<double> expected;
    std::vector<std::vector<int32_t>> second(support.size());
    for (size_t i = 0; i < support.size(); ++i) {
      std::vector<int32_t> context = prompt;
      context.push_back(support[i]);
      const std::vector<float> p2 = TargetProbs(*target_.model, params, context);
      for (int v = 0; v < static_cast<int>(p2.size()); ++v) {
        if (p2[v] <= 0.0f) continue;
        second[i].push_back(v);
        expected.push_back(static_cast<double>(p1[support[i]]) * p2[v]);
      }
    }
    std::vector<int64_t> counts(expected.size() + 1, 0);  // the last: outside the support
    std::unique_ptr<CrossVocabDrafter> drafter = MakeCross(mapping);
    const uint64_t seed = testing::DistributionTestSeed();
    int drafted = 0;
    int accepted = 0;
    for (int s = 0; s < samples; ++s) {
      params.seed = seed + static_cast<uint64_t>(s);
      const SpecRun run =
          RunSpec(*drafter, *target_.model, prompt, 2, VerifyMode::kRejection, params, 2, corrupt);
      drafted += run.drafted;
      accepted += run.accepted;
      size_t cell = expected.size();
      const auto i = std::find(support.begin(), support.end(), run.tokens[0]) - support.begin();
      if (static_cast<size_t>(i) < support.size()) {
        const auto j =
            std::find(second[i].begin(), second[i].end(), run.tokens[1]) - second[i].begin();
        if (static_cast<size_t>(j) < second[i].size()) {
          cell = 0;
          for (size_t a = 0; a < static_cast<size_t>(i); ++a) cell += second[a].size();
          cell += static_cast<size_t>(j);
        }
      }
      ++counts[cell];
    }
    expected.push_back(0.0);
    const testing::ChiSquareResult result = testing::ChiSquareTest(counts, expected);
    testing::PrintChiSquare(name, result);
    std::printf("%s: %d of %d drafts accepted\n", name.c_str(), accepted, drafted);
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, drafted);  // the residual path runs too
    return result.p_value;
  }
};

TEST_F(CrossVocabDistributionTest, IntersectionKeepsTheTargetsLaw) {
  EXPECT_GT(ContinuationPValue("intersection", VocabMapping::kIntersection, nullptr, 3000), 1e-3);
}

// String mapping under rejection: the re-tokenized drafts ship a one-hot q.
TEST_F(CrossVocabDistributionTest, StringMappingKeepsTheTargetsLaw) {
  EXPECT_GT(ContinuationPValue("string", VocabMapping::kString, nullptr, 3000), 1e-3);
}

// The same test rejects a q mapped to the wrong target ids (each probability
// moved to the next id of the block's support; the drafted tokens unchanged).
TEST_F(CrossVocabDistributionTest, AWrongMappingFailsTheSameTest) {
  auto rotate = [](DraftRequest& r) {
    for (SparseDistribution& q : r.q) {
      if (q.token_ids.size() < 2) continue;
      std::rotate(q.token_ids.begin(), q.token_ids.begin() + 1, q.token_ids.end());
    }
  };
  EXPECT_LT(ContinuationPValue("wrong mapping", VocabMapping::kIntersection, rotate, 3000), 1e-3);
}

}  // namespace
}  // namespace splitspec::spec
