// Verification rules, edge cases and errors (the distribution tests are in
// verify_distribution_test.cc, drafter invariance in verify_coupled_test.cc).
#include "runtime/spec/verify.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "runtime/spec/sampling.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

using testing::FreshSeed;
using testing::RandomDistribution;

std::vector<float> Rows(const std::vector<std::vector<float>>& rows) {
  std::vector<float> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return flat;
}

// Random rows, random drafts: every accepted token is its row's argmax, the
// correction is the argmax at the first mismatch, the bonus is argmax p_k.
TEST(VerifyTest, GreedyAcceptsExactlyTheArgmaxPrefix) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 7;
  for (int trial = 0; trial < 2000; ++trial) {
    const int k = std::uniform_int_distribution<int>(0, 5)(rng);
    std::vector<std::vector<float>> rows;
    std::vector<int32_t> tokens, argmax;
    for (int i = 0; i <= k; ++i) {
      rows.push_back(RandomDistribution(vocab, rng, 0.2));
      argmax.push_back(kernels::ArgmaxProbs(rows.back().data(), vocab));
      // Half the time draft the argmax, so that long accepted prefixes occur.
      if (i < k) tokens.push_back(rng() % 2 ? argmax.back() : static_cast<int32_t>(rng() % vocab));
    }
    const std::vector<float> flat = Rows(rows);
    VerifyRequest request;
    request.mode = VerifyMode::kGreedy;
    request.target_probs = flat;
    request.draft_tokens = tokens;
    request.seed = rng();
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, vocab);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    int expect_accepted = 0;
    while (expect_accepted < k && tokens[expect_accepted] == argmax[expect_accepted])
      ++expect_accepted;
    ASSERT_EQ(outcome->accepted, expect_accepted);
    ASSERT_EQ(outcome->rejected, expect_accepted < k);
    ASSERT_EQ(static_cast<int>(outcome->committed.size()), expect_accepted + 1);
    for (int i = 0; i <= expect_accepted; ++i)
      ASSERT_EQ(outcome->committed[i], argmax[i]) << "i=" << i;
  }
}

TEST(VerifyTest, GreedyTiesGoToTheLowestTokenId) {
  const std::vector<float> rows = {0.1f, 0.4f, 0.1f, 0.4f, 0.25f, 0.25f, 0.25f, 0.25f};
  const std::vector<int32_t> tokens = {3};
  VerifyRequest request;
  request.mode = VerifyMode::kGreedy;
  request.target_probs = rows;
  request.draft_tokens = tokens;
  absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, 4);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->committed, std::vector<int32_t>({1}));
  EXPECT_TRUE(outcome->rejected);
}

TEST(VerifyTest, WithoutBonusFullAcceptanceCommitsOnlyTheDraft) {
  const std::vector<int32_t> tokens = {1, 2};
  const std::vector<float> rows3 = {0, 1, 0, 0, 0, 1, 1, 0, 0};
  VerifyRequest request;
  request.mode = VerifyMode::kGreedy;
  request.target_probs = rows3;
  request.draft_tokens = tokens;
  request.want_bonus = false;
  absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, 3);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->committed, tokens);
  EXPECT_EQ(outcome->accepted, 2);
  EXPECT_FALSE(outcome->rejected);
  request.want_bonus = true;
  outcome = VerifyBlock(request, 3);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->committed, std::vector<int32_t>({1, 2, 0}));
}

TEST(VerifyTest, RefusesDraftTokenWithZeroQ) {
  const std::vector<float> rows = {0.5f, 0.5f, 0.0f, 0.5f, 0.5f, 0.0f};
  const std::vector<int32_t> tokens = {1};
  const std::vector<SparseDistribution> sparse = {{{0, 2}, {0.5f, 0.5f}}};
  const std::vector<float> dense = {0.5f, 0.0f, 0.5f};
  for (bool use_dense : {false, true}) {
    VerifyRequest request;
    request.target_probs = rows;
    request.draft_tokens = tokens;
    if (use_dense)
      request.draft_q_dense = dense;
    else
      request.draft_q_sparse = sparse;
    request.start_position = 40;
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, 3);
    ASSERT_FALSE(outcome.ok());
    EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(outcome.status().message().find("draft token 1 has q = 0"), std::string::npos)
        << outcome.status();
    EXPECT_NE(outcome.status().message().find("position 40"), std::string::npos)
        << outcome.status();
  }
}

// p(x) = 0 rejects whatever the uniform, and the correction is never x.
TEST(VerifyTest, TargetZeroProbabilityAlwaysRejects) {
  const uint64_t base = FreshSeed();
  const std::vector<float> rows = {0.0f, 0.3f, 0.7f, 0.2f, 0.3f, 0.5f};
  const std::vector<int32_t> tokens = {0};
  const std::vector<SparseDistribution> q = {{{0, 1}, {0.9f, 0.1f}}};
  for (int t = 0; t < 1000; ++t) {
    VerifyRequest request;
    request.target_probs = rows;
    request.draft_tokens = tokens;
    request.draft_q_sparse = q;
    request.seed = base + t;
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, 3);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_TRUE(outcome->rejected);
    ASSERT_EQ(outcome->accepted, 0);
    ASSERT_NE(outcome->committed[0], 0);
  }
}

// q >= p everywhere (q sums above 1 by round-off, here exaggerated): the residual
// max(0, p - q) is all zero, so the correction falls back to sampling p; no error,
// no NaN, and both tokens of p's support occur.
TEST(VerifyTest, ResidualWithoutMassFallsBackToP) {
  const uint64_t base = FreshSeed();
  const std::vector<float> rows = {0.5f, 0.5f, 0.5f, 0.5f};
  const std::vector<int32_t> tokens = {0};
  const std::vector<float> q = {1.0f, 0.5f};
  int rejected = 0;
  std::vector<int> corrections(2);
  for (int t = 0; t < 400; ++t) {
    VerifyRequest request;
    request.target_probs = rows;
    request.draft_tokens = tokens;
    request.draft_q_dense = q;
    request.seed = base + t;
    request.want_bonus = false;
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, 2);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    if (outcome->rejected) {
      ++rejected;
      ++corrections.at(outcome->committed[0]);
    }
  }
  // Rejection probability 1/2 per trial: 400 trials give at least one of each
  // correction except with probability ~2 * 0.75^400 (negligible).
  EXPECT_GT(rejected, 0);
  EXPECT_GT(corrections[0], 0);
  EXPECT_GT(corrections[1], 0);
}

// Rows that do not sum to 1 (round-off), with denormal and tiny entries: every
// committed token has positive target probability and lies in the vocabulary.
TEST(VerifyTest, RoundOffNeverCommitsAZeroProbabilityToken) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 9;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<float> p = RandomDistribution(vocab, rng, 0.4);
    std::vector<float> q = RandomDistribution(vocab, rng, 0.4);
    p[rng() % vocab] = 1e-40f;  // denormal
    q[rng() % vocab] = 1e-30f;
    for (float& x : p) x *= 1.0f + 1e-6f;
    const std::vector<float> rows = Rows({p, p});
    absl::StatusOr<DraftChoice> draft = ChooseDraftToken(VerifyMode::kRejection, q, 4, rng(), 0);
    ASSERT_TRUE(draft.ok());
    const std::vector<int32_t> tokens = {draft->token};
    const std::vector<SparseDistribution> qs = {draft->q};
    VerifyRequest request;
    request.target_probs = rows;
    request.draft_tokens = tokens;
    request.draft_q_sparse = qs;
    request.seed = rng();
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, vocab);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    for (int32_t token : outcome->committed) {
      ASSERT_GE(token, 0);
      ASSERT_LT(token, vocab);
      ASSERT_GT(p[token], 0.0f);
    }
  }
}

TEST(VerifyTest, RefusesMalformedInputsNamingTheValue) {
  const std::vector<float> rows = {0.5f, 0.5f, 0.5f, 0.5f};
  const std::vector<int32_t> out_of_range = {5};
  const std::vector<int32_t> token = {0};
  VerifyRequest request;
  request.mode = VerifyMode::kGreedy;
  request.target_probs = rows;
  request.draft_tokens = out_of_range;
  absl::Status status = VerifyBlock(request, 2).status();
  EXPECT_NE(status.message().find("draft token 5 is outside"), std::string::npos) << status;

  const std::vector<float> negative = {0.5f, -0.5f, 0.5f, 0.5f};
  request.draft_tokens = token;
  request.target_probs = negative;
  status = VerifyBlock(request, 2).status();
  EXPECT_NE(status.message().find("target row 0"), std::string::npos) << status;

  const std::vector<float> nan_rows = {0.5f, 0.5f, NAN, 0.5f};
  request.target_probs = nan_rows;
  status = VerifyBlock(request, 2).status();  // token 0 accepted, bonus row 1 has NaN
  EXPECT_NE(status.message().find("target row 1"), std::string::npos) << status;

  request.mode = VerifyMode::kRejection;
  request.target_probs = rows;
  status = VerifyBlock(request, 2).status();
  EXPECT_NE(status.message().find("exactly one of draft_q_sparse / draft_q_dense"),
            std::string::npos)
      << status;

  const std::vector<SparseDistribution> repeated = {{{0, 0}, {0.5f, 0.5f}}};
  request.draft_q_sparse = repeated;
  status = VerifyBlock(request, 2).status();
  EXPECT_NE(status.message().find("token id 0 repeated"), std::string::npos) << status;

  EXPECT_EQ(VerifyBlock(request, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// VerifyBatch over ragged blocks (k = 0 included), all modes, sparse and dense
// q mixed, and one malformed request, equals VerifyBlock request by request.
TEST(VerifyTest, BatchEqualsSingleBlocksAndIsolatesErrors) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 11, n = 24;
  std::vector<std::vector<float>> rows(n), q_dense(n);
  std::vector<std::vector<int32_t>> tokens(n);
  std::vector<std::vector<SparseDistribution>> q_sparse(n);
  std::vector<VerifyRequest> requests(n);
  for (int s = 0; s < n; ++s) {
    const int k = s % 6;
    const VerifyMode mode = static_cast<VerifyMode>(s % 3);
    const uint64_t seed = rng();
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> p = RandomDistribution(vocab, rng, 0.2);
      rows[s].insert(rows[s].end(), p.begin(), p.end());
      if (i == k) break;
      const std::vector<float> q = RandomDistribution(vocab, rng, 0.3);
      DraftChoice d = *ChooseDraftToken(mode, q, 5, seed, 100 + i);
      if (mode != VerifyMode::kRejection) d.q = *TopQDistribution(q, 5);
      tokens[s].push_back(d.token);
      q_sparse[s].push_back(d.q);
      std::vector<float> dense(vocab, 0.0f);
      for (size_t j = 0; j < d.q.token_ids.size(); ++j) dense[d.q.token_ids[j]] = d.q.probs[j];
      q_dense[s].insert(q_dense[s].end(), dense.begin(), dense.end());
    }
    VerifyRequest& r = requests[s];
    r.mode = mode;
    r.target_probs = rows[s];
    r.draft_tokens = tokens[s];
    if (mode == VerifyMode::kRejection && k > 0) {
      if (s % 2)
        r.draft_q_dense = q_dense[s];
      else
        r.draft_q_sparse = q_sparse[s];
    }
    r.seed = seed;
    r.start_position = 100;
    r.want_bonus = s % 4 != 0;
  }
  std::vector<int32_t> bad_tokens = tokens[5];
  bad_tokens[0] = vocab;  // request 5 is malformed
  requests[5].draft_tokens = bad_tokens;

  absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> batch = VerifyBatch(requests, vocab);
  ASSERT_TRUE(batch.ok()) << batch.status();
  for (int s = 0; s < n; ++s) {
    absl::StatusOr<VerifyOutcome> single = VerifyBlock(requests[s], vocab);
    ASSERT_EQ(single.ok(), (*batch)[s].ok()) << "s=" << s;
    if (!single.ok()) {
      EXPECT_EQ(s, 5);
      EXPECT_EQ(single.status(), (*batch)[s].status());
      continue;
    }
    EXPECT_EQ(single->committed, (*batch)[s]->committed) << "s=" << s;
    EXPECT_EQ(single->accepted, (*batch)[s]->accepted) << "s=" << s;
    EXPECT_EQ(single->rejected, (*batch)[s]->rejected) << "s=" << s;
  }
  // The only valid request of a batch is verified on its own rows (no copy), and
  // its outcome lands at its own index.
  VerifyRequest short_rows = requests[7];  // fails validation: one row short
  short_rows.target_probs = short_rows.target_probs.subspan(vocab);
  for (int s : {6, 7, 8, 10, 11}) {
    const VerifyRequest pair[2] = {short_rows, requests[s]};
    absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> two = VerifyBatch(pair, vocab);
    ASSERT_TRUE(two.ok()) << two.status();
    EXPECT_NE((*two)[0].status().message().find("target_probs has"), std::string::npos);
    ASSERT_TRUE((*two)[1].ok()) << (*two)[1].status();
    EXPECT_EQ((*two)[1]->committed, (*batch)[s]->committed) << "s=" << s;
    EXPECT_EQ((*two)[1]->accepted, (*batch)[s]->accepted) << "s=" << s;
  }
}

// VerifyGreedyTokens is VerifyBlock on the one-hot rows LogitsToProbs makes of greedy
// logits: random logits (ties included), drafts that follow the argmax or not, tokens
// out of range, with and without the bonus: the same outcome or the same error.
TEST(VerifyTest, GreedyTokensEqualVerifyBlockOnTheOneHotRows) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 9;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int trial = 0; trial < 3000; ++trial) {
    const int k = std::uniform_int_distribution<int>(0, 8)(rng);
    std::vector<float> rows;
    std::vector<int32_t> target_tokens, draft;
    for (int i = 0; i <= k; ++i) {
      std::vector<float> logits(vocab);
      for (float& l : logits) l = static_cast<float>(rng() % 5);  // ties are common
      std::vector<float> probs(vocab);
      ASSERT_TRUE(LogitsToProbs(greedy, logits, absl::MakeSpan(probs)).ok());
      rows.insert(rows.end(), probs.begin(), probs.end());
      absl::StatusOr<int32_t> token = GreedyToken(logits);
      ASSERT_TRUE(token.ok()) << token.status();
      ASSERT_EQ(probs[*token], 1.0f) << "GreedyToken is not the one-hot's token";
      target_tokens.push_back(*token);
      if (i == k) break;
      const uint64_t pick = rng() % 8;
      draft.push_back(pick < 5   ? *token
                      : pick < 7 ? static_cast<int32_t>(rng() % vocab)
                                 : (pick == 7 && rng() % 4 == 0 ? vocab + 3 : -1));
    }
    const bool want_bonus = rng() % 3 != 0;
    const int64_t start = static_cast<int64_t>(rng() % 1000);
    VerifyRequest request;
    request.mode = VerifyMode::kGreedy;
    request.target_probs = rows;
    request.draft_tokens = draft;
    request.start_position = start;
    request.want_bonus = want_bonus;
    const absl::StatusOr<VerifyOutcome> want = VerifyBlock(request, vocab);
    const absl::StatusOr<VerifyOutcome> got =
        VerifyGreedyTokens(target_tokens, draft, start, want_bonus, vocab);
    ASSERT_EQ(got.ok(), want.ok()) << "trial " << trial << ": " << got.status() << " vs "
                                   << want.status();
    if (!want.ok()) {
      EXPECT_EQ(got.status(), want.status());
      continue;
    }
    EXPECT_EQ(got->accepted, want->accepted) << "trial " << trial;
    EXPECT_EQ(got->rejected, want->rejected) << "trial " << trial;
    EXPECT_EQ(got->committed, want->committed) << "trial " << trial;
  }
}

TEST(VerifyTest, GreedyTokenRefusesWhatLogitsToProbsRefuses) {
  EXPECT_FALSE(GreedyToken({}).ok());
  EXPECT_NE(GreedyToken({1.0f, NAN}).status().message().find("logit of token 1"),
            std::string::npos);
  EXPECT_NE(GreedyToken({-INFINITY, -INFINITY}).status().message().find("every logit is -inf"),
            std::string::npos);
  EXPECT_EQ(*GreedyToken({-INFINITY, 2.0f, 2.0f}), 1);  // the lowest id among ties
  EXPECT_FALSE(VerifyGreedyTokens({1, 2}, {1, 2}, 0, true, 5).ok());  // k + 1 rows needed
}

}  // namespace
}  // namespace splitspec::spec

namespace splitspec::spec {
namespace {

TEST(VerifyModeTest, ParsesNamesAndRefusesOthersNamingThem) {
  for (VerifyMode mode : {VerifyMode::kGreedy, VerifyMode::kRejection, VerifyMode::kCoupled}) {
    EXPECT_EQ(*ParseVerifyMode(VerifyModeName(mode)), mode);
  }
  const absl::Status status = ParseVerifyMode("typical").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'typical'"), std::string::npos) << status;
}

}  // namespace
}  // namespace splitspec::spec
