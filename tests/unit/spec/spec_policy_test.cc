// The speculation policy (runtime/spec/spec_policy.h) on synthetic estimates,
// and a property on a simulated drafter grid: the policy, learning from the
// blocks it runs, is never more than 3% slower than plain decoding and comes
// close to the best fixed action the model knows for the true acceptance.
#include "runtime/spec/spec_policy.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/analytic_model.h"

namespace splitspec::spec {
namespace {

// Estimates with `evidence` verified positions at acceptance `alpha`, a target
// step of 1 s (so rates and costs read in plain steps) and a draft C times cheaper.
SpecEstimates Make(double alpha, double evidence, double cost_ratio, double slope = 0.1,
                   double overhead = 0.03) {
  SpecEstimates e;
  e.accepted = alpha * evidence;
  e.verified = evidence;
  e.target_step_seconds = 1.0;
  e.target_slope = slope;
  e.draft_seconds_per_token = 1.0 / cost_ratio;
  e.block_overhead_seconds = overhead;
  return e;
}

SpecChoices Choices(bool overlapped = false, bool cached = false) {
  SpecChoices c;
  c.overlapped = overlapped;
  c.cached = cached;
  return c;
}

TEST(SpecPolicyTest, NoAcceptanceTurnsSpeculationOffForAWindow) {
  const SpecAction action = ChooseSpecAction(Make(0.0, 20, 100), Choices(true), SpecMode::kSequential);
  EXPECT_EQ(action.mode, SpecMode::kOff);
  EXPECT_EQ(action.k, 0);
  EXPECT_GT(action.off_tokens, 0);
  EXPECT_TRUE(action.probe);  // a free drafter is worth another try once the evidence ages
  EXPECT_TRUE(action.shadow);  // and meanwhile it is cheap enough to score in the shadow
}

TEST(SpecPolicyTest, TheOffWindowEndsWhereAgedEvidenceTurnsSpeculationOn) {
  const SpecEstimates e = Make(0.0, 20, 100);
  const SpecAction action = ChooseSpecAction(e, Choices(), SpecMode::kOff);
  ASSERT_EQ(action.mode, SpecMode::kOff);
  ASSERT_TRUE(action.probe);
  SpecEstimates before = e;
  before.RecordPlainTokens(action.off_tokens - 1);
  EXPECT_EQ(ChooseSpecAction(before, Choices(), SpecMode::kOff).mode, SpecMode::kOff);
  SpecEstimates at = e;
  at.RecordPlainTokens(action.off_tokens);
  EXPECT_NE(ChooseSpecAction(at, Choices(), SpecMode::kOff).mode, SpecMode::kOff);
  // More evidence of failure: a longer window (the back-off).
  EXPECT_GT(ChooseSpecAction(Make(0.0, 30, 100), Choices(), SpecMode::kOff).off_tokens,
            action.off_tokens);
}

TEST(SpecPolicyTest, HighAcceptanceAndACheapDraftRunOverlappedWithLongerBlocks) {
  const SpecAction high =
      ChooseSpecAction(Make(0.95, 100, 10, 0.02), Choices(true), SpecMode::kSequential);
  EXPECT_EQ(high.mode, SpecMode::kOverlapped);
  const SpecAction mid =
      ChooseSpecAction(Make(0.6, 100, 10, 0.02), Choices(true), SpecMode::kSequential);
  EXPECT_NE(mid.mode, SpecMode::kOff);
  EXPECT_GT(high.k, mid.k);
  EXPECT_GT(high.rate, 2.0);
}

TEST(SpecPolicyTest, ARequestWithoutEvidenceTriesABlock) {
  SpecEstimates e;  // nothing measured: acceptance 0.5 +- its width, costs free
  const SpecAction action = ChooseSpecAction(e, Choices(true), SpecMode::kOff);
  EXPECT_NE(action.mode, SpecMode::kOff);
  EXPECT_GE(action.k, 1);
}

// Before a block times the draft, its prior prices it: a draft that reads as many
// weights as the target (the target as its own draft) loses at full acceptance,
// so a fresh worker's first request starts off and never probes; a draft 50x
// lighter speculates from the first block, with k chosen at that cost (not only
// the min_k of an unknown draft). A measured cost overrides the prior.
TEST(SpecPolicyTest, TheDraftsPriorPricesItUntilABlockTimesIt) {
  SpecEstimates self;
  self.draft_cost_prior = 1.0;
  const SpecAction off = ChooseSpecAction(self, Choices(true), SpecMode::kOverlapped);
  EXPECT_EQ(off.mode, SpecMode::kOff);
  EXPECT_FALSE(off.probe);
  EXPECT_FALSE(off.shadow);
  SpecEstimates small;
  small.draft_cost_prior = 0.02;
  const SpecAction on = ChooseSpecAction(small, Choices(true), SpecMode::kOff);
  EXPECT_NE(on.mode, SpecMode::kOff);
  EXPECT_GT(on.k, 1);
  EXPECT_NEAR(on.rate, PredictedRate(Make(0.5, 0, 50, 0.0, 0.0), on.mode, on.k, small.AlphaUpper()),
              1e-9);
  SpecEstimates measured = self;
  measured.target_step_seconds = 1.0;
  measured.draft_seconds_per_token = 0.02;
  EXPECT_NE(ChooseSpecAction(measured, Choices(true), SpecMode::kOff).mode, SpecMode::kOff);
}

// The serving loop's time per step (sampling, events, streaming) is paid by a
// plain token as by a block: charged to blocks alone it made a block at
// alpha 0.35, k = 1 look like a loss (1.35 tokens for 1 + 0.2 + 0.25 steps:
// 0.93x); shared, the block takes 1.45 steps against the 1.25 of a plain token
// (1.35 / 1.45 * 1.25 = 1.16x), and the policy speculates.
TEST(SpecPolicyTest, TimePlainDecodingPaysTooIsNoCostOfSpeculation) {
  SpecEstimates charged = Make(0.35, 10000, 1e9, /*slope=*/0.2, /*overhead=*/0.25);
  SpecEstimates shared = Make(0.35, 10000, 1e9, /*slope=*/0.2, /*overhead=*/0.0);
  shared.step_overhead_seconds = 0.25;
  EXPECT_NEAR(PredictedRate(charged, SpecMode::kSequential, 1, 0.35), 1.35 / 1.45, 1e-6);
  EXPECT_NEAR(PredictedRate(shared, SpecMode::kSequential, 1, 0.35), 1.35 / 1.45 * 1.25, 1e-6);
  EXPECT_EQ(ChooseSpecAction(charged, Choices(), SpecMode::kSequential).mode, SpecMode::kOff);
  const SpecAction on = ChooseSpecAction(shared, Choices(), SpecMode::kSequential);
  EXPECT_EQ(on.mode, SpecMode::kSequential);
  EXPECT_GE(on.k, 1);
}

TEST(SpecPolicyTest, TheUpperBoundTriesAnUnsampledCacheAndDropsOneThatNeverHits) {
  // A costly draft (C = 2): the cache pays only if its pre-drafts hit.
  SpecEstimates e = Make(0.9, 100, 2.0, 0.05, 0.0);
  EXPECT_EQ(ChooseSpecAction(e, Choices(false, true), SpecMode::kSequential).mode,
            SpecMode::kCached);
  for (int i = 0; i < 100; ++i) e.RecordCacheLookup(false);
  EXPECT_EQ(ChooseSpecAction(e, Choices(false, true), SpecMode::kCached).mode,
            SpecMode::kSequential);
}

TEST(SpecPolicyTest, InterferenceMakesDraftingBesideTheVerificationLose) {
  SpecEstimates e = Make(0.8, 100, 4.0, 0.05);
  e.cache_hits = 60;
  e.cache_lookups = 100;
  EXPECT_EQ(ChooseSpecAction(e, Choices(true, true), SpecMode::kSequential).mode,
            SpecMode::kCached);
  e.interference = 1.0;  // drafting beside the verification doubles its time
  EXPECT_EQ(ChooseSpecAction(e, Choices(true, true), SpecMode::kCached).mode,
            SpecMode::kSequential);
}

TEST(SpecPolicyTest, HysteresisKeepsTheCurrentActionAgainstASmallPredictedGain) {
  // Find an acceptance whose best predicted rate sits inside the margin above 1.
  double alpha = 0.0;
  SpecAction inside;
  for (double a = 0.0; a <= 1.0; a += 0.002) {
    const SpecAction s = ChooseSpecAction(Make(a, 1e6, 20), Choices(), SpecMode::kSequential);
    if (s.mode != SpecMode::kOff && s.rate > 1.005 && s.rate < 1.0 + kMargin - 0.005) {
      alpha = a;
      inside = s;
      break;
    }
  }
  ASSERT_GT(inside.k, 0) << "no acceptance predicts a gain inside the margin";
  const SpecEstimates e = Make(alpha, 1e6, 20);
  EXPECT_EQ(ChooseSpecAction(e, Choices(), SpecMode::kOff).mode, SpecMode::kOff);
  EXPECT_EQ(ChooseSpecAction(e, Choices(), SpecMode::kSequential).mode, SpecMode::kSequential);
  // Flapping: alternating evidence around that point never switches the mode
  // more than once, whichever mode it starts in.
  for (SpecMode start : {SpecMode::kOff, SpecMode::kSequential}) {
    SpecMode mode = start;
    int switches = 0;
    SpecEstimates drift = e;
    for (int i = 0; i < 200; ++i) {
      const double a = alpha + (i % 2 == 0 ? 0.004 : -0.004);
      drift.accepted = a * 1e6;
      const SpecMode next = ChooseSpecAction(drift, Choices(), mode).mode;
      switches += next != mode;
      mode = next;
    }
    EXPECT_LE(switches, 1) << SpecModeName(start);
  }
}

TEST(SpecPolicyTest, ADraftThatLosesAtFullAcceptanceIsNeverProbed) {
  const SpecAction action =
      ChooseSpecAction(Make(1.0, 100, 0.8), Choices(true), SpecMode::kSequential);
  EXPECT_EQ(action.mode, SpecMode::kOff);
  EXPECT_FALSE(action.probe);
  EXPECT_EQ(action.off_tokens, kMaxOffTokens);
  EXPECT_FALSE(action.shadow);  // a block costs more than a plain step
}

// A block overhead measured under a passing load (here 10 plain steps per block)
// makes even full acceptance lose; the plain tokens that follow fade it like
// acceptance evidence, so the verdict is tried again instead of holding forever.
TEST(SpecPolicyTest, ACostSpikeFadesWithPlainTokensAndSpeculationIsTriedAgain) {
  SpecEstimates e = Make(0.9, 40, 100, 0.1, /*overhead=*/10.0);
  const SpecAction spiked = ChooseSpecAction(e, Choices(), SpecMode::kSequential);
  EXPECT_EQ(spiked.mode, SpecMode::kOff);
  e.RecordPlainTokens(600);  // 0.995^600 = 0.05: the overhead is 0.5 plain steps now
  EXPECT_NEAR(e.block_overhead_seconds, 10.0 * std::pow(kForget, 600), 1e-9);
  EXPECT_NE(ChooseSpecAction(e, Choices(), SpecMode::kOff).mode, SpecMode::kOff);
}

// A model drafter at a request's start (or after an off window) holds none of
// the tokens it must draft past: 300 tokens at 0.05 plain steps each are 15 plain
// steps before its first block. A good drafter (alpha 0.8, C = 10) repays them
// over a long request, not over the last 20 tokens of one; unmeasured, it is free.
TEST(SpecPolicyTest, ACatchUpTheRequestsRemainingTokensCannotRepayKeepsSpeculationOff) {
  SpecEstimates e = Make(0.8, 40, 10);
  e.catch_up_tokens = 300;
  e.catch_up_seconds_per_token = 0.05;
  e.horizon_tokens = 1000;
  const SpecAction long_request = ChooseSpecAction(e, Choices(), SpecMode::kOff);
  EXPECT_NE(long_request.mode, SpecMode::kOff);
  const double free_rate = ChooseSpecAction(Make(0.8, 40, 10), Choices(), SpecMode::kOff).rate;
  EXPECT_NEAR(long_request.rate, 1000.0 / (1000.0 / free_rate + 15.0), 1e-9);  // rule 2
  e.horizon_tokens = 20;
  const SpecAction short_rest = ChooseSpecAction(e, Choices(), SpecMode::kOff);
  EXPECT_EQ(short_rest.mode, SpecMode::kOff);
  // Off, each plain token adds to what it lacks and uses up the horizon: no
  // later point pays either, so no probe.
  EXPECT_FALSE(short_rest.probe);
  e.catch_up_seconds_per_token = 0.0;  // unmeasured: free (rule 1)
  EXPECT_NE(ChooseSpecAction(e, Choices(), SpecMode::kOff).mode, SpecMode::kOff);
}

// Rule 4 with catch-up: the window ends at the first point where the aged
// evidence pays for the tokens the drafter will then lack; with a horizon too
// short for any such point, there is no probe at all.
TEST(SpecPolicyTest, TheOffWindowCountsTheCatchUpItsTokensAdd) {
  SpecEstimates e = Make(0.0, 20, 100);
  e.horizon_tokens = 400;
  const SpecAction free_catch_up = ChooseSpecAction(e, Choices(), SpecMode::kOff);
  e.catch_up_seconds_per_token = 0.02;  // a plain step per 50 tokens
  const SpecAction priced = ChooseSpecAction(e, Choices(), SpecMode::kOff);
  ASSERT_TRUE(priced.probe);
  EXPECT_GT(priced.off_tokens, free_catch_up.off_tokens);
  auto speculates_after = [&](int tokens) {
    SpecEstimates aged = e;
    aged.RecordPlainTokens(tokens);
    aged.catch_up_tokens += tokens;
    aged.horizon_tokens -= tokens;
    return ChooseSpecAction(aged, Choices(), SpecMode::kOff).mode != SpecMode::kOff;
  };
  EXPECT_FALSE(speculates_after(priced.off_tokens - 1));
  EXPECT_TRUE(speculates_after(priced.off_tokens));
  e.horizon_tokens = priced.off_tokens;  // the request ends where the window would
  const SpecAction ends_first = ChooseSpecAction(e, Choices(), SpecMode::kOff);
  EXPECT_FALSE(ends_first.probe);
  EXPECT_EQ(ends_first.off_tokens, kMaxOffTokens);
}

TEST(SpecPolicyTest, ABatchedTargetChargesEveryDraftTokenToTheWholeBatch) {
  SpecEstimates e = Make(0.6, 200, 50, 0.05);
  EXPECT_NE(ChooseSpecAction(e, Choices(), SpecMode::kSequential).mode, SpecMode::kOff);
  e.target_batch = 64;
  EXPECT_EQ(ChooseSpecAction(e, Choices(), SpecMode::kSequential).mode, SpecMode::kOff);
}

TEST(SpecPolicyTest, FixedChoicesWithoutOffKeepTheirK) {
  SpecChoices c;
  c.min_k = c.max_k = 5;
  c.allow_off = false;
  const SpecAction action = ChooseSpecAction(Make(0.0, 100, 2), c, SpecMode::kSequential);
  EXPECT_EQ(action.mode, SpecMode::kSequential);
  EXPECT_EQ(action.k, 5);
}

TEST(SpecPolicyTest, EstimatesCountPositionsAndIgnoreUnusableSamples) {
  SpecEstimates e;
  e.RecordBlock(3, true);
  EXPECT_NEAR(e.verified, 4.0, 1e-12);
  EXPECT_NEAR(e.accepted, 3.0, 1e-12);
  e.RecordBlock(0, false);  // nothing verified: no evidence
  EXPECT_NEAR(e.verified, 4.0, 1e-12);
  e.RecordPlainTokens(10);
  EXPECT_NEAR(e.verified, 4.0 * std::pow(kForget, 10), 1e-12);
  e.RecordDraftSeconds(-1.0);
  e.RecordDraftSeconds(NAN);
  EXPECT_EQ(e.draft_seconds_per_token, 0.0);
  e.RecordDraftSeconds(0.01);
  EXPECT_EQ(e.draft_seconds_per_token, 0.01);
  e.RecordTargetLine(0.0, 0.1);
  EXPECT_EQ(e.target_step_seconds, 0.0);
  e.RecordTargetLine(0.02, 0.1);
  EXPECT_EQ(e.target_step_seconds, 0.02);
  e.RecordInterference(-0.5);  // a faster step beside a draft is no negative cost
  EXPECT_EQ(e.interference, 0.0);
  EXPECT_GT(e.AlphaUpper(), e.AlphaMean());
  EXPECT_LE(e.AlphaUpper(), 1.0);
}

// Confidence classes: evidence per class, and the rule pricing a proposal's
// positions by their classes' bounds.
TEST(SpecPolicyTest, ClassEvidenceCountsEachDraftedPositionForItsClass) {
  SpecEstimates e;
  const int8_t classes[] = {1, 3, 3, 2};
  e.RecordBlock(2, true, classes);  // positions 0, 1 accepted, 2 rejected, 3 unverified
  EXPECT_NEAR(e.verified, 3.0, 1e-12);
  EXPECT_NEAR(e.class_verified[1], 1.0, 1e-12);
  EXPECT_NEAR(e.class_accepted[1], 1.0, 1e-12);
  EXPECT_NEAR(e.class_verified[3], 2.0, 1e-12);
  EXPECT_NEAR(e.class_accepted[3], 1.0, 1e-12);
  EXPECT_EQ(e.class_verified[2], 0.0);
  EXPECT_EQ(e.class_verified[0], 0.0);
  const int8_t out_of_range[] = {-1, kConfidenceClasses};
  e.RecordBlock(1, true, out_of_range);  // counted in the request's evidence only
  EXPECT_NEAR(e.class_verified[3], 2.0 * std::pow(kForget, 2), 1e-12);
  EXPECT_NEAR(e.verified, 3.0 * std::pow(kForget, 2) + 2.0, 1e-12);
  e.RecordPlainTokens(10);
  EXPECT_NEAR(e.class_verified[3], 2.0 * std::pow(kForget, 12), 1e-12);
  EXPECT_EQ(e.ClassUpper(kConfidenceClasses), e.AlphaUpper());
}

// Estimates whose class c was verified `evidence` times at acceptance class_alpha[c].
SpecEstimates WithClasses(SpecEstimates e, const std::vector<double>& class_alpha,
                          double evidence) {
  for (int c = 0; c < kConfidenceClasses; ++c) {
    e.class_accepted[c] = class_alpha[c] * evidence;
    e.class_verified[c] = evidence;
  }
  return e;
}

// Asks a model-free drafter answers with nothing: p+ of rule 1, and rule 2's
// price of an ask.
TEST(SpecPolicyTest, AsksAnsweredEmptyLowerTheProposalBoundNotAcceptance) {
  SpecEstimates e;
  EXPECT_EQ(e.ProposalUpper(), 1.0);  // no evidence
  for (int i = 0; i < 10; ++i) e.RecordAsk(true);
  EXPECT_EQ(e.ProposalUpper(), 1.0);  // never unanswered: a model drafter is priced as before
  for (int i = 0; i < 10; ++i) e.RecordAsk(false);
  EXPECT_NEAR(e.asks, (1.0 - std::pow(kForget, 20)) / (1.0 - kForget), 1e-9);
  EXPECT_GT(e.ProposalUpper(), 0.5);  // about half answered, plus the optimism
  EXPECT_LT(e.ProposalUpper(), 0.7);
  EXPECT_EQ(e.verified, 0.0);  // no drafted position was rejected
  const double before = e.asks;
  e.RecordPlainTokens(10);  // the target's tokens age this evidence too
  EXPECT_NEAR(e.asks, before * std::pow(kForget, 10), 1e-9);
}

TEST(SpecPolicyTest, AnAskIsSizedByItsDraftedPositionsNotByEmptyAnswers) {
  // A drafter whose proposals are accepted 80% of the time but that finds a
  // match only every other ask. Counted as rejections, the empty answers drag
  // acceptance to ~0.45 and the ask to a short block; priced by their chance
  // (rule 2), the ask is as long as the proposals' acceptance pays for.
  SpecEstimates as_chance = Make(0.8, 40, 1e5, /*slope=*/0.15, /*overhead=*/0.0);
  for (int i = 0; i < 40; ++i) as_chance.RecordAsk(i % 2 == 0);
  SpecEstimates as_rejections = Make(0.8, 40, 1e5, 0.15, 0.0);
  as_rejections.verified += 20;  // one rejected position per empty answer
  const SpecAction by_chance = ChooseSpecAction(as_chance, Choices(), SpecMode::kSequential);
  const SpecAction by_rejections =
      ChooseSpecAction(as_rejections, Choices(), SpecMode::kSequential);
  ASSERT_EQ(by_chance.mode, SpecMode::kSequential);
  EXPECT_GT(by_chance.k, by_rejections.k);
}

TEST(SpecPolicyTest, EmptyAnswersThatPayABlockOverheadTurnSpeculationOff) {
  // A remote drafter that rarely finds anything: each empty answer costs a round
  // trip (overhead 0.5 of a step) for nothing, so rule 3 goes off...
  SpecEstimates rare = Make(0.8, 40, 1e5, 0.1, /*overhead=*/0.5);
  for (int i = 0; i < 200; ++i) rare.RecordAsk(i % 10 == 0);
  EXPECT_EQ(ChooseSpecAction(rare, Choices(), SpecMode::kSequential).mode, SpecMode::kOff);
  // ...while one that always finds something, at the same acceptance, speculates.
  SpecEstimates always = Make(0.8, 40, 1e5, 0.1, 0.5);
  EXPECT_EQ(ChooseSpecAction(always, Choices(), SpecMode::kSequential).mode, SpecMode::kSequential);
  // A proposal in hand is priced by its classes: the chance of getting one is 1.
  SpecEstimates classed = WithClasses(rare, {0.9, 0.9, 0.9, 0.9}, 50);
  const int8_t proposal[] = {3, 3, 3, 3};
  SpecChoices c = Choices();
  c.proposal = proposal;
  EXPECT_EQ(ChooseSpecAction(classed, c, SpecMode::kSequential).mode, SpecMode::kSequential);
}

TEST(SpecPolicyTest, AProposalIsCutWhereItsNextPositionsNoLongerPay) {
  // A mediocre request average (the estimates' alpha 0.35), but classes that
  // separate: the proposal's confident positions are sent, its weak tail is not.
  const SpecEstimates e =
      WithClasses(Make(0.35, 200, 1000, 0.1, 0.0), {0.1, 0.45, 0.7, 0.95}, 200);
  SpecChoices c = Choices();
  const int8_t strong_then_weak[] = {3, 3, 3, 3, 0, 0, 0, 0};
  c.proposal = strong_then_weak;
  const SpecAction cut = ChooseSpecAction(e, c, SpecMode::kSequential);
  EXPECT_EQ(cut.mode, SpecMode::kSequential);
  EXPECT_EQ(cut.k, 4);
  // All strong: the whole proposal.
  const int8_t strong[] = {3, 3, 3, 3, 3, 3, 3, 3};
  c.proposal = strong;
  EXPECT_EQ(ChooseSpecAction(e, c, SpecMode::kSequential).k, 8);
  // Without classes the same request is priced at its average: a short block.
  const SpecAction average = ChooseSpecAction(e, Choices(), SpecMode::kSequential);
  EXPECT_LT(average.k, 4);
  EXPECT_LT(average.rate, cut.rate);
}

TEST(SpecPolicyTest, AProposalWhoseFirstPositionsAreUnlikelyIsNotSent) {
  const SpecEstimates e =
      WithClasses(Make(0.35, 200, 1000, 0.1, 0.1), {0.1, 0.45, 0.7, 0.95}, 200);
  SpecChoices c = Choices();
  const int8_t weak_first[] = {0, 3, 3, 3};  // a likely tail behind an unlikely head
  c.proposal = weak_first;
  const SpecAction weak = ChooseSpecAction(e, c, SpecMode::kSequential);
  EXPECT_EQ(weak.mode, SpecMode::kOff);
  EXPECT_EQ(weak.k, 0);
  // A confident head is sent, and so is as much of the tail as pays.
  const int8_t strong_first[] = {3, 3, 0, 3};
  c.proposal = strong_first;
  const SpecAction strong = ChooseSpecAction(e, c, SpecMode::kOff);
  EXPECT_EQ(strong.mode, SpecMode::kSequential);
  EXPECT_EQ(strong.k, 2);
}

TEST(SpecPolicyTest, ABatchTooSteepForEvenAConfidentProposalWithholdsIt) {
  // Each draft token costs the whole batch: with the slope of a big batch not
  // even a 0.8 class pays.
  SpecEstimates e = WithClasses(Make(0.3, 200, 1000, 0.5, 0.0), {0.1, 0.3, 0.5, 0.8}, 400);
  SpecChoices c = Choices();
  const int8_t confident[] = {3, 3, 3, 3};
  c.proposal = confident;
  EXPECT_EQ(ChooseSpecAction(e, c, SpecMode::kSequential).mode, SpecMode::kSequential);
  e.target_batch = 64;
  EXPECT_EQ(ChooseSpecAction(e, c, SpecMode::kSequential).mode, SpecMode::kOff);
}

// --- the simulated drafter grid ------------------------------------------
// A drafter of true acceptance alpha (iid per position) and cost ratio C beside
// a target of slope s and block overhead o (units of a plain step). Each block
// the policy runs is drawn and charged what the pipeline model charges that
// outcome; the policy learns acceptance and costs only from those blocks.
struct World {
  double alpha;
  double cost_ratio;
  double slope = 0.1;
  double overhead = 0.05;
};

double RealizedRate(const World& w, const SpecChoices& choices, int tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  SpecEstimates e;
  e.target_step_seconds = 1.0;  // the target reports its line
  e.target_slope = w.slope;
  SpecMode previous = SpecMode::kSequential;
  double time = 0.0;
  int committed = 0;
  const double d_token = 1.0 / w.cost_ratio;
  auto draw = [&](int k) {
    int a = 0;
    while (a < k && uniform(rng) < w.alpha) ++a;
    return a;
  };
  while (committed < tokens) {
    const SpecAction action = ChooseSpecAction(e, choices, previous);
    previous = action.mode;
    if (action.mode == SpecMode::kOff) {
      const int n = std::min(action.off_tokens, tokens - committed);
      if (action.shadow) {  // scored against the target's tokens, its cost beside
        const int a = draw(action.shadow_k);
        e.RecordBlock(a, a < action.shadow_k);
        time += action.shadow_k * d_token;
      }
      committed += n;
      time += n;
      e.RecordPlainTokens(n);
      continue;
    }
    const int k = action.k;
    const int a = draw(k);
    const double d = k * d_token;
    const double verify = 1.0 + w.slope * k;  // k drafts + the previous correction
    if (action.mode == SpecMode::kSequential) {
      committed += a + 1;
      time += d + verify + w.overhead;
    } else if (d > 1.0 + w.slope * (k - 1)) {  // overlapped, draft-bound
      committed += a + 1;
      time += 2.0 * d + w.overhead;
    } else if (a == k) {  // overlapped: the queued block follows, no bonus
      committed += k;
      time += 1.0 + w.slope * (k - 1);
    } else {  // a rejection: the queued block is stale, the draft refills
      committed += a + 1;
      time += verify + d + w.overhead;
    }
    e.RecordBlock(a, a < k);
    e.RecordDraftSeconds(d_token);
    e.RecordBlockOverhead(w.overhead);
  }
  return committed / time;
}

// The best fixed action for the true acceptance and costs (off: 1).
double OracleRate(const World& w, const SpecChoices& choices) {
  SpecEstimates e;
  e.target_step_seconds = 1.0;
  e.target_slope = w.slope;
  e.draft_seconds_per_token = 1.0 / w.cost_ratio;
  e.block_overhead_seconds = w.overhead;
  double best = 1.0;
  for (SpecMode mode : {SpecMode::kSequential, SpecMode::kOverlapped}) {
    if (mode == SpecMode::kOverlapped && !choices.overlapped) continue;
    for (int k = choices.min_k; k <= choices.max_k; ++k)
      best = std::max(best, PredictedRate(e, mode, k, w.alpha));
  }
  return best;
}

// ChooseVerifiedDrafts: a brute-force check of the rule's optimum. For every
// prefix vector kept (each candidate cut anywhere), the step's expected tokens
// per second in units of T0 is (deciding + sum of survivals) / (1 + slope (fed - 1));
// the greedy rule must reach the best of them (survivals decrease along a block,
// so the greedy prefix order is optimal).
double StepRate(const std::vector<VerifyCandidate>& c, const std::vector<int>& kept, int deciding,
                double slope) {
  double tokens = deciding, fed = deciding;
  for (size_t i = 0; i < c.size(); ++i) {
    const double n = c[i].verified + 2.0, mean = (c[i].accepted + 1.0) / n;
    const double alpha = std::min(1.0, mean + kConfidenceZ * std::sqrt(mean * (1.0 - mean) / n));
    double s = 1.0;
    for (int j = 0; j < kept[i]; ++j)
      tokens += (s *= j < static_cast<int>(c[i].acceptance.size()) ? c[i].acceptance[j] : alpha);
    fed += kept[i];
  }
  return tokens / (1.0 + slope * (fed - 1.0));
}

TEST(VerifiedDraftsTest, ReachesTheBestStepRateOfEveryPrefixChoice) {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 3);
    const int deciding = n + static_cast<int>(rng() % 40);
    const double slope = std::uniform_real_distribution<double>(0.01, 0.6)(rng);
    std::vector<VerifyCandidate> c(n);
    // Some blocks carry their own per-position estimates (a prefix of them, or
    // all): the rule must price those positions by them.
    std::vector<std::vector<float>> own(n);
    for (int i = 0; i < n; ++i) {
      VerifyCandidate& x = c[i];
      x.verified = rng() % 60;
      x.accepted = std::uniform_real_distribution<double>(0.0, 1.0)(rng) * x.verified;
      x.drafted = static_cast<int>(rng() % 6);
      if (rng() % 2 == 0) {
        own[i].resize(rng() % (x.drafted + 1));
        for (float& a : own[i]) a = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
        x.acceptance = own[i];
      }
    }
    const std::vector<int> kept = ChooseVerifiedDrafts(c, deciding, slope);
    double best = 0.0;
    std::vector<int> cut(n, 0);
    while (true) {  // every combination of prefixes
      best = std::max(best, StepRate(c, cut, deciding, slope));
      int i = 0;
      while (i < n && cut[i] == c[i].drafted) cut[i++] = 0;
      if (i == n) break;
      ++cut[i];
    }
    EXPECT_NEAR(StepRate(c, kept, deciding, slope), best, 1e-9 * best) << "trial " << trial;
    for (int i = 0; i < n; ++i) EXPECT_LE(kept[i], c[i].drafted);
  }
}

TEST(VerifiedDraftsTest, OneRequestKeepsItsBlockAndABigBatchCutsAWeakOne) {
  // Alone, at slope 0.1, a fresh request's block of 4 is verified whole (its
  // acceptance bound, 0.85, makes the 4th draft survive with 0.53 > 0.27).
  EXPECT_EQ(ChooseVerifiedDrafts({{0, 0, 4}}, 1, 0.1), std::vector<int>{4});
  // 64 requests in the step: a draft must survive with nearly the step's own
  // tokens per cost to pay; a 50%-accepting request's block is cut away, a
  // 99%-accepting one's is kept.
  const std::vector<int> kept = ChooseVerifiedDrafts({{50, 100, 4}, {990, 1000, 4}}, 64, 0.1);
  EXPECT_EQ(kept[0], 0);
  EXPECT_EQ(kept[1], 4);
  // Free extra positions (slope 0): everything is verified.
  EXPECT_EQ(ChooseVerifiedDrafts({{0, 100, 5}}, 64, 0.0), std::vector<int>{5});
}

TEST(VerifiedDraftsTest, PricesEachPositionByItsBlocksOwnEstimates) {
  // Two requests with the same average (500 of 1000 accepted: alpha+ 0.52) in a
  // step of 16 at slope 0.1, where a draft pays only if it survives with > 0.64.
  const VerifyCandidate average{.accepted = 500, .verified = 1000, .drafted = 4};
  EXPECT_EQ(ChooseVerifiedDrafts({average, average}, 16, 0.1), (std::vector<int>{0, 0}));
  // Their drafters priced the blocks differently: the confident block is kept
  // whole, the unconfident one (and one without estimates) is cut away.
  const std::vector<float> confident = {0.95f, 0.95f, 0.95f, 0.95f};
  const std::vector<float> unconfident = {0.3f, 0.9f, 0.9f, 0.9f};
  VerifyCandidate a = average, b = average;
  a.acceptance = confident;
  b.acceptance = unconfident;
  EXPECT_EQ(ChooseVerifiedDrafts({a, b, average}, 16, 0.1), (std::vector<int>{4, 0, 0}));
  // A block is cut where its survival stops paying, even when a later position
  // alone would be likely (survival is the product: 0.95 * 0.2 * 0.99 < 0.64).
  const std::vector<float> weak_middle = {0.95f, 0.2f, 0.99f};
  VerifyCandidate c{.accepted = 500, .verified = 1000, .drafted = 3};
  c.acceptance = weak_middle;
  EXPECT_EQ(ChooseVerifiedDrafts({c}, 16, 0.1), std::vector<int>{1});
  // Estimates for only the first positions: the rest are priced at alpha+.
  const std::vector<float> first_only = {0.99f};
  VerifyCandidate d{.accepted = 500, .verified = 1000, .drafted = 3};
  d.acceptance = first_only;
  EXPECT_EQ(ChooseVerifiedDrafts({d}, 16, 0.1), std::vector<int>{1});
}

TEST(SpecPolicySimGridTest, NeverSlowerThanPlainBeyondThreePercentAndNearTheOracle) {
  int cells = 0;
  for (bool overlapped : {false, true}) {
    const SpecChoices choices = Choices(overlapped);
    for (double alpha : {0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.97}) {
      for (double cost_ratio : {0.8, 2.0, 5.0, 10.0, 50.0}) {
        const World world{alpha, cost_ratio};
        const double oracle = OracleRate(world, choices);
        const double realized = RealizedRate(world, choices, 6000, 7u + cells);
        ++cells;
        const std::string where =
            (::testing::Message() << "alpha " << alpha << " C " << cost_ratio << " overlapped "
                                  << overlapped << ": realized " << realized << " oracle "
                                  << oracle)
                .GetString();
        EXPECT_GE(realized, std::min(1.0, oracle) - 0.03) << where;
        EXPECT_GE(realized, 0.9 * oracle) << where;
      }
    }
  }
  EXPECT_EQ(cells, 70);
}

}  // namespace
}  // namespace splitspec::spec
