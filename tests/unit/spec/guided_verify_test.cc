// Speculation under classifier-free guidance: the draft proposes from its plain
// distribution q, the target verifies against the guided distribution p_g =
// LogitsToProbs(l_u + s * (l_c - l_u)), and the committed tokens must be
// distributed exactly as guided decoding of the target alone.
//
// The target is a pair of tiny Markov chains over logits (conditional and
// unconditional rows per previous token); the reference law is computed here in
// double precision, independently of GuidedLogitsToProbs and the kernels.
// Significance: each test's total false-failure probability is <= 1e-3
// (Bonferroni over its chi-square checks). The chi-square tests' seeds are fixed per
// test (DistributionTestSeed); HarnessRejectsAWrongCombination shows a wrong law fails.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/verify.h"
#include "tests/testing/chi_square.h"
#include "tests/unit/spec/markov_model.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

using testing::ChiSquareResult;
using testing::ChiSquareTest;
using testing::DistributionTestSeed;
using testing::FreshSeed;
using testing::MarkovModel;
using testing::PrintChiSquare;

constexpr int kVocab = 4;
constexpr int kLength = 3;

// Conditional and unconditional logits of the next token given the previous one.
struct GuidedChain {
  std::vector<std::vector<float>> cond, uncond;  // [kVocab][kVocab]

  static GuidedChain Random(std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0f, 1.5f);
    GuidedChain chain;
    for (int prev = 0; prev < kVocab; ++prev) {
      std::vector<float> c(kVocab), u(kVocab);
      for (int v = 0; v < kVocab; ++v) {
        c[v] = normal(rng);
        u[v] = normal(rng);
      }
      // One masked token per chain on some rows: masked in either means masked.
      if (prev == 1) c[3] = -INFINITY;
      if (prev == 2) u[0] = -INFINITY;
      chain.cond.push_back(c);
      chain.uncond.push_back(u);
    }
    return chain;
  }
};

// How the pipeline turns the two rows into p: the real GuidedLogitsToProbs, or a
// deliberately wrong combination for the harness check.
using RowRule = std::function<std::vector<float>(const SamplingParams&, const std::vector<float>&,
                                                 const std::vector<float>&)>;

std::vector<float> RealGuidedRow(const SamplingParams& params, const std::vector<float>& c,
                                 const std::vector<float>& u) {
  std::vector<float> p(c.size());
  const absl::Status status = GuidedLogitsToProbs(params, c, u, absl::MakeSpan(p));
  EXPECT_TRUE(status.ok()) << status;
  return p;
}

// Wrong: guides away from the prompt (l_c + s * (l_u - l_c)).
std::vector<float> SwappedGuidedRow(const SamplingParams& params, const std::vector<float>& c,
                                    const std::vector<float>& u) {
  return RealGuidedRow(params, u, c);
}

// The independent reference: guided logits, temperature, top-k, softmax, all in double.
std::vector<double> ReferenceGuidedRow(const SamplingParams& params, const std::vector<float>& c,
                                       const std::vector<float>& u) {
  const double s = params.guidance_scale;
  std::vector<double> g(c.size());
  for (size_t v = 0; v < c.size(); ++v) {
    g[v] = (std::isinf(c[v]) || std::isinf(u[v])) ? -INFINITY : u[v] + s * (c[v] - u[v]);
  }
  if (params.top_k > 0) {
    std::vector<double> sorted = g;
    std::sort(sorted.rbegin(), sorted.rend());
    const double cutoff = sorted[std::min<size_t>(params.top_k, sorted.size()) - 1];
    for (double& x : g) x = x < cutoff ? -INFINITY : x;
  }
  const double max = *std::max_element(g.begin(), g.end());
  double total = 0.0;
  std::vector<double> p(g.size());
  for (size_t v = 0; v < g.size(); ++v) total += p[v] = std::exp((g[v] - max) / params.temperature);
  for (double& x : p) x /= total;
  return p;
}

// Guided decoding of `length` tokens after `first`, speculatively with blocks of k
// drafted from `draft` (k = 0: the target alone), verified against rule(p rows).
std::vector<int32_t> GuidedDecode(VerifyMode mode, const GuidedChain& target,
                                  const MarkovModel& draft, const SamplingParams& params,
                                  const RowRule& rule, int k, uint64_t seed, int32_t first) {
  std::vector<int32_t> sequence = {first};
  while (static_cast<int>(sequence.size()) < kLength + 1) {
    const int64_t position = static_cast<int64_t>(sequence.size());
    auto row = [&](int32_t prev) { return rule(params, target.cond[prev], target.uncond[prev]); };
    std::vector<float> rows = row(sequence.back());
    std::vector<int32_t> tokens;
    std::vector<SparseDistribution> q;
    int32_t context = sequence.back();
    for (int i = 0; i < k; ++i) {
      absl::StatusOr<DraftChoice> choice =
          ChooseDraftToken(mode, draft.Next(context), kVocab, seed, position + i);
      EXPECT_TRUE(choice.ok()) << choice.status();
      tokens.push_back(choice->token);
      q.push_back(choice->q);
      context = choice->token;
      const std::vector<float> next = row(context);
      rows.insert(rows.end(), next.begin(), next.end());
    }
    VerifyRequest request;
    request.mode = mode;
    request.target_probs = rows;
    request.draft_tokens = tokens;
    if (mode == VerifyMode::kRejection && k > 0) request.draft_q_sparse = q;
    request.seed = seed;
    request.start_position = position;
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, kVocab);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    if (!outcome.ok()) return {0, 0, 0};
    sequence.insert(sequence.end(), outcome->committed.begin(), outcome->committed.end());
  }
  return std::vector<int32_t>(sequence.begin() + 1, sequence.begin() + 1 + kLength);
}

struct PipelineSetup {
  std::string name;
  VerifyMode mode;
  int k;
};

// Chi-square of the joint law of 3 committed tokens against the reference.
ChiSquareResult JointLawTest(const PipelineSetup& setup, const SamplingParams& params,
                             const RowRule& rule) {
  std::mt19937_64 rng(DistributionTestSeed());
  const GuidedChain target = GuidedChain::Random(rng);
  const MarkovModel draft = MarkovModel::Random(kVocab, rng, 0.0);
  const int cells = kVocab * kVocab * kVocab, trials = 30000;
  const uint64_t base_seed = DistributionTestSeed();
  std::vector<int64_t> counts(cells);
  for (int t = 0; t < trials; ++t) {
    SamplingParams seeded = params;
    seeded.seed = base_seed + t;
    const std::vector<int32_t> s =
        GuidedDecode(setup.mode, target, draft, seeded, rule, setup.k, seeded.seed, 0);
    ++counts[(s[0] * kVocab + s[1]) * kVocab + s[2]];
  }
  std::vector<double> expected(cells);
  for (int cell = 0; cell < cells; ++cell) {
    const int32_t tokens[] = {cell / (kVocab * kVocab), (cell / kVocab) % kVocab, cell % kVocab};
    double probability = 1.0;
    int32_t prev = 0;
    for (int32_t x : tokens) {
      probability *= ReferenceGuidedRow(params, target.cond[prev], target.uncond[prev])[x];
      prev = x;
    }
    expected[cell] = probability;
  }
  return ChiSquareTest(counts, expected);
}

const std::vector<PipelineSetup>& PipelineSetups() {
  static const std::vector<PipelineSetup> setups = {{"plain guided", VerifyMode::kRejection, 0},
                                            {"rejection k=2", VerifyMode::kRejection, 2},
                                            {"rejection k=4", VerifyMode::kRejection, 4},
                                            {"coupled k=3", VerifyMode::kCoupled, 3}};
  return setups;
}

void ExpectGuidedJointLaw(const SamplingParams& params, const std::string& label) {
  const double threshold = 1e-3 / PipelineSetups().size();
  for (const PipelineSetup& setup : PipelineSetups()) {
    const ChiSquareResult r = JointLawTest(setup, params, RealGuidedRow);
    PrintChiSquare("guided " + label + ", " + setup.name, r);
    EXPECT_GT(r.p_value, threshold) << setup.name;
  }
}

TEST(GuidedVerifyTest, CommittedTokensHaveTheGuidedJointLaw) {
  SamplingParams params;
  params.guidance_scale = 1.5f;
  ExpectGuidedJointLaw(params, "s=1.5");
}

TEST(GuidedVerifyTest, GuidedJointLawWithTemperatureAndTopK) {
  SamplingParams params;
  params.guidance_scale = 3.0f;
  params.temperature = 0.8f;
  params.top_k = 3;
  ExpectGuidedJointLaw(params, "s=3 T=0.8 top_k=3");
}

// The same harness must reject a wrong combination: guiding away from the prompt
// gives a law far from the reference (every setup, so no mode hides it).
TEST(GuidedVerifyTest, HarnessRejectsAWrongCombination) {
  SamplingParams params;
  params.guidance_scale = 1.5f;
  for (const PipelineSetup& setup : PipelineSetups()) {
    const ChiSquareResult r = JointLawTest(setup, params, SwappedGuidedRow);
    PrintChiSquare("wrong combination, " + setup.name, r);
    EXPECT_LT(r.p_value, 1e-3) << setup.name;
  }
}

// Greedy guided speculation commits exactly the guided argmax chain, whatever the
// draft proposes.
TEST(GuidedVerifyTest, GreedyGuidedSpeculativeEqualsGreedyGuidedPlain) {
  std::mt19937_64 rng(FreshSeed());
  SamplingParams params;
  params.temperature = 0.0f;
  params.guidance_scale = 2.0f;
  for (int trial = 0; trial < 50; ++trial) {
    const GuidedChain target = GuidedChain::Random(rng);
    const MarkovModel draft = MarkovModel::Random(kVocab, rng, 0.0);
    const int32_t first = trial % kVocab;
    const std::vector<int32_t> plain =
        GuidedDecode(VerifyMode::kGreedy, target, draft, params, RealGuidedRow, 0, 1, first);
    for (int k : {1, 2, 4}) {
      EXPECT_EQ(GuidedDecode(VerifyMode::kGreedy, target, draft, params, RealGuidedRow, k, 1, first),
                plain)
          << "trial " << trial << " k=" << k;
    }
  }
}

// s = 1 is plain decoding: bitwise the same p as LogitsToProbs of the conditional row.
TEST(GuidedVerifyTest, ScaleOneIsBitwisePlainSampling) {
  std::mt19937_64 rng(FreshSeed());
  std::normal_distribution<float> normal(0.0f, 2.0f);
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_p = 0.9f;
  std::vector<float> c(1001), u(1001);
  for (float& x : c) x = normal(rng);
  for (float& x : u) x = normal(rng);
  std::vector<float> plain(c.size()), guided(c.size());
  ASSERT_TRUE(LogitsToProbs(params, c, absl::MakeSpan(plain)).ok());
  ASSERT_TRUE(GuidedLogitsToProbs(params, c, u, absl::MakeSpan(guided)).ok());
  EXPECT_EQ(0, std::memcmp(plain.data(), guided.data(), plain.size() * sizeof(float)));
}

TEST(GuidedVerifyTest, RefusesBadScaleAndSizesNamingThem) {
  SamplingParams params;
  params.guidance_scale = -0.5f;
  std::vector<float> c = {0.0f, 1.0f}, u = {1.0f, 0.0f}, p(2);
  absl::Status status = GuidedLogitsToProbs(params, c, u, absl::MakeSpan(p));
  EXPECT_NE(status.message().find("guidance_scale"), std::string::npos) << status;
  params.guidance_scale = 2.0f;
  std::vector<float> short_u = {1.0f};
  status = GuidedLogitsToProbs(params, c, short_u, absl::MakeSpan(p));
  EXPECT_NE(status.message().find("uncond 1"), std::string::npos) << status;
}

}  // namespace
}  // namespace splitspec::spec
