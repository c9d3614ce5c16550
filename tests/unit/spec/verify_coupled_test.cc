// Coupled mode is drafter-invariant: for a fixed seed the committed sequence
// equals target-only Gumbel-max decoding, whatever the draft proposes, whatever
// k, with or without bonus tokens, alone or batched with other requests.
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/ngram_drafter.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/verify.h"
#include "tests/unit/spec/markov_model.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

using testing::FreshSeed;
using testing::MarkovModel;

// Proposes the token for `position` given everything before it.
using DraftFn = std::function<int32_t(const std::vector<int32_t>& context, int64_t position)>;

constexpr int kVocab = 6;
constexpr int kLength = 40;

std::vector<int32_t> TargetOnly(const MarkovModel& target, uint64_t seed) {
  std::vector<int32_t> sequence = {0};
  for (int64_t position = 1; position <= kLength; ++position) {
    sequence.push_back(
        *ChooseTargetToken(VerifyMode::kCoupled, target.Next(sequence.back()), seed, position));
  }
  return sequence;
}

// The rows and tokens of one block: k drafts from `draft` after `sequence`.
struct Block {
  std::vector<int32_t> tokens;
  std::vector<float> rows;
};

Block MakeBlock(const MarkovModel& target, const DraftFn& draft,
                const std::vector<int32_t>& sequence, int k) {
  Block block;
  std::vector<int32_t> context = sequence;
  block.rows = target.Next(context.back());
  for (int i = 0; i < k; ++i) {
    const int32_t token = draft(context, static_cast<int64_t>(context.size()));
    context.push_back(token);
    block.tokens.push_back(token);
    block.rows.insert(block.rows.end(), target.Next(token).begin(), target.Next(token).end());
  }
  return block;
}

// Speculative decoding with `draft`; `all_accepted` reports whether every block
// was accepted in full.
std::vector<int32_t> Speculative(const MarkovModel& target, const DraftFn& draft, int k, bool bonus,
                                 uint64_t seed, bool* all_accepted) {
  std::vector<int32_t> sequence = {0};
  *all_accepted = true;
  while (static_cast<int>(sequence.size()) <= kLength) {
    const Block block = MakeBlock(target, draft, sequence, k);
    VerifyRequest request;
    request.mode = VerifyMode::kCoupled;
    request.target_probs = block.rows;
    request.draft_tokens = block.tokens;
    request.seed = seed;
    request.start_position = static_cast<int64_t>(sequence.size());
    request.want_bonus = bonus;
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, kVocab);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    *all_accepted = *all_accepted && outcome->accepted == k;
    sequence.insert(sequence.end(), outcome->committed.begin(), outcome->committed.end());
  }
  sequence.resize(kLength + 1);
  return sequence;
}

struct NamedDraft {
  std::string name;
  DraftFn draft;
};

std::vector<NamedDraft> Drafts(const MarkovModel& target, const MarkovModel& other, uint64_t seed,
                               std::mt19937_64& rng) {
  std::vector<NamedDraft> drafts;
  drafts.push_back(
      {"other model, coupled", [&other, seed](const std::vector<int32_t>& c, int64_t pos) {
         return ChooseDraftToken(VerifyMode::kCoupled, other.Next(c.back()), 4, seed, pos)->token;
       }});
  drafts.push_back({"uniform random", [&rng](const std::vector<int32_t>&, int64_t) {
                      return static_cast<int32_t>(rng() % kVocab);
                    }});
  drafts.push_back({"constant 0", [](const std::vector<int32_t>&, int64_t) { return 0; }});
  drafts.push_back({"ngram", [](const std::vector<int32_t>& c, int64_t) {
                      const std::vector<int32_t> next = NgramLookup(c, 1, NgramDrafterConfig{});
                      return next.empty() ? c.back() : next[0];
                    }});
  return drafts;
}

TEST(VerifyCoupledTest, OutputIsTheSameWhateverTheDraftAndK) {
  std::mt19937_64 rng(FreshSeed());
  const MarkovModel target = MarkovModel::Random(kVocab, rng, 0.2);
  const MarkovModel other = MarkovModel::Random(kVocab, rng, 0.2);
  const uint64_t seed = FreshSeed();
  const std::vector<int32_t> expected = TargetOnly(target, seed);
  for (const NamedDraft& d : Drafts(target, other, seed, rng)) {
    for (int k : {1, 2, 4, 7}) {
      for (bool bonus : {true, false}) {
        bool all_accepted = false;
        EXPECT_EQ(Speculative(target, d.draft, k, bonus, seed, &all_accepted), expected)
            << d.name << " k=" << k << " bonus=" << bonus;
      }
    }
  }
}

// The target's own Gumbel-max choice as the draft is accepted in full every time.
TEST(VerifyCoupledTest, DraftEqualToTargetIsAlwaysAccepted) {
  std::mt19937_64 rng(FreshSeed());
  const MarkovModel target = MarkovModel::Random(kVocab, rng, 0.2);
  const uint64_t seed = FreshSeed();
  const DraftFn same = [&target, seed](const std::vector<int32_t>& c, int64_t pos) {
    return ChooseDraftToken(VerifyMode::kCoupled, target.Next(c.back()), 4, seed, pos)->token;
  };
  for (int k : {1, 3, 8}) {
    bool all_accepted = false;
    EXPECT_EQ(Speculative(target, same, k, true, seed, &all_accepted), TargetOnly(target, seed));
    EXPECT_TRUE(all_accepted) << "k=" << k;
  }
}

// Several requests with different seeds and k verified together in VerifyBatch
// produce each request's target-only output.
TEST(VerifyCoupledTest, BatchCompositionDoesNotChangeOutput) {
  std::mt19937_64 rng(FreshSeed());
  const MarkovModel target = MarkovModel::Random(kVocab, rng, 0.2);
  const MarkovModel other = MarkovModel::Random(kVocab, rng, 0.2);
  const int n = 5;
  std::vector<uint64_t> seeds(n);
  std::vector<std::vector<int32_t>> sequences(n, std::vector<int32_t>{0});
  for (uint64_t& s : seeds) s = FreshSeed();
  for (int step = 0; step < 200; ++step) {
    std::vector<Block> blocks(n);
    std::vector<VerifyRequest> requests(n);
    for (int r = 0; r < n; ++r) {
      const uint64_t seed = seeds[r];
      const DraftFn draft = [&other, seed](const std::vector<int32_t>& c, int64_t pos) {
        return ChooseDraftToken(VerifyMode::kCoupled, other.Next(c.back()), 4, seed, pos)->token;
      };
      blocks[r] = MakeBlock(target, draft, sequences[r], static_cast<int>((step + r) % 5));
      requests[r].mode = VerifyMode::kCoupled;
      requests[r].target_probs = blocks[r].rows;
      requests[r].draft_tokens = blocks[r].tokens;
      requests[r].seed = seed;
      requests[r].start_position = static_cast<int64_t>(sequences[r].size());
    }
    absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> outcomes =
        VerifyBatch(requests, kVocab);
    ASSERT_TRUE(outcomes.ok());
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE((*outcomes)[r].ok()) << (*outcomes)[r].status();
      sequences[r].insert(sequences[r].end(), (*outcomes)[r]->committed.begin(),
                          (*outcomes)[r]->committed.end());
    }
  }
  for (int r = 0; r < n; ++r) {
    sequences[r].resize(kLength + 1);
    EXPECT_EQ(sequences[r], TargetOnly(target, seeds[r])) << "request " << r;
  }
}

}  // namespace
}  // namespace splitspec::spec
