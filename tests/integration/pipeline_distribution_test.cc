// Losslessness through the whole pipeline (coordinator, target worker, draft
// worker over channels, with faults): sampled continuations are distributed
// exactly as the target's own distribution, and greedy output survives
// dropped, delayed and reordered data-plane messages unchanged.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/lookup_drafter.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/spec/ngram_drafter.h"
#include "runtime/spec/sampling.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/in_process_pipeline.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/chi_square.h"
#include "tests/testing/sequence_law.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

std::string WriteModel(const std::string& name, uint32_t seed,
                       kernels::GgmlType weight_type = kernels::GgmlType::kQ8_0) {
  model::TinyModelOptions options;
  options.weight_type = weight_type;
  options.seed = seed;
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name + ".gguf";
  EXPECT_TRUE(model::WriteTinyModel(options, path).ok());
  return path;
}

// p of the first generated token, from the target itself.
std::vector<float> FirstTokenProbs(model::Transformer& model, const std::vector<int32_t>& prompt,
                                   const spec::SamplingParams& params) {
  const int vocab = model.config().vocab_size;
  auto cache = model.NewCache();
  model::ForwardOutput out;
  EXPECT_TRUE(model.Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out).ok());
  std::vector<float> p(vocab);
  EXPECT_TRUE(
      spec::LogitsToProbs(params, absl::MakeConstSpan(out.Row(0, 0), vocab), absl::MakeSpan(p))
          .ok());
  return p;
}

// A tiny target (one thread) and a model drafter on another GGUF, with the target's
// tokenizer.
struct TargetWithModelDrafter {
  std::unique_ptr<model::Transformer> target;
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<spec::ModelDrafter> drafter;
};

void LoadTargetWithModelDrafter(const std::string& target_path, const std::string& draft_path,
                                TargetWithModelDrafter* out) {
  auto target = model::Transformer::Load(target_path, {.threads = 1});
  ASSERT_TRUE(target.ok()) << target.status();
  out->target = *std::move(target);
  auto target_file = model::GgufFile::Open(target_path);
  ASSERT_TRUE(target_file.ok()) << target_file.status();
  auto tokenizer = model::LoadTokenizerFromGguf(**target_file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  out->tokenizer = std::make_unique<model::Tokenizer>(*std::move(tokenizer));
  auto drafter = spec::ModelDrafter::Load(draft_path, *out->tokenizer,
                                          out->target->config().vocab_size, {.threads = 1});
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  out->drafter = *std::move(drafter);
}

// Temperature 1, top-k 4: the sampled tests' parameters (a small support keeps the
// cell count, and the test, small).
spec::SamplingParams TopFourParams() {
  spec::SamplingParams params;
  params.temperature = 1.0f;
  params.top_k = 4;
  return params;
}

// The tiny target of seed 1 (WriteModel NAME), one thread.
void LoadTarget(const std::string& name, std::unique_ptr<model::Transformer>* target) {
  auto loaded = model::Transformer::Load(WriteModel(name, 1), {.threads = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  *target = *std::move(loaded);
}

// The seed-1 target (LoadTarget NAME), TopFourParams, and a prompt whose lookup trie
// has two candidates at its root: {17, b, 99, 17, c, 99, 17}, "17" followed by b and
// by c, with b and c each sampled with p >= 0.1 by the target and together <= 0.9, so
// the first candidate, the second and the correction all commit (the first such b
// ascending, then c < 64 ascending).
struct TwoCandidateSetup {
  std::unique_ptr<model::Transformer> target;
  spec::SamplingParams params;
  std::vector<int32_t> prompt;
  int32_t b = 0, c = 0;
};

void SetUpTwoCandidates(const std::string& name, TwoCandidateSetup* setup) {
  ASSERT_NO_FATAL_FAILURE(LoadTarget(name, &setup->target));
  setup->params = TopFourParams();
  const int vocab = setup->target->config().vocab_size;
  for (int32_t b = 1; b < vocab; ++b) {
    for (int32_t c = 1; c < std::min(vocab, 64); ++c) {
      if (c == b || c == 17 || c == 99 || b == 17 || b == 99) continue;
      const std::vector<int32_t> candidate = {17, b, 99, 17, c, 99, 17};
      const std::vector<float> first = FirstTokenProbs(*setup->target, candidate, setup->params);
      if (first[b] >= 0.1 && first[c] >= 0.1 && first[b] + first[c] <= 0.9) {
        setup->prompt = candidate;
        setup->b = b;
        setup->c = c;
        return;
      }
    }
  }
  FAIL() << "no two tokens the target samples with p >= 0.1, together <= 0.9";
}

// The law of the first `tokens` generated tokens of `prompt` under `params`, exactly,
// from the target itself: continuation -> probability. `first_row`, if set, replaces
// the first token's distribution (a deliberately wrong rule's law; the rest stays the
// target's).
std::map<std::vector<int32_t>, double> ExactContinuationLaw(
    model::Transformer& model, const std::vector<int32_t>& prompt,
    const spec::SamplingParams& params, int tokens,
    const std::vector<double>* first_row = nullptr) {
  return spec::testing::ExactSequenceLaw(tokens, [&](const std::vector<int32_t>& generated) {
    if (generated.empty() && first_row != nullptr) return *first_row;
    std::vector<int32_t> context = prompt;
    context.insert(context.end(), generated.begin(), generated.end());
    const std::vector<float> p = FirstTokenProbs(model, context, params);
    return std::vector<double>(p.begin(), p.end());
  });
}

// Sums of the speculation stats of a test's requests.
struct SpecTotals {
  uint64_t drafted = 0, accepted = 0, verified = 0, tree_steps = 0;
};

// Draw `d` of a sampled test: `samples` requests PREFIX-n, n = d * samples + i, each
// for a `tokens`-token continuation of `prompt` under `params`' temperature and top-k
// with seed 1000003 n + `seed_offset`, verified by `mode` with draft_k `k`; run 50 at
// a time (within the target's 64), each wave polled at most 4000 times. Returns how
// often each continuation was committed, or nullopt at the first that is not `tokens`
// long (which fails the current test). `totals` sums the requests' stats.
std::optional<std::map<std::vector<int32_t>, int64_t>> DrawContinuations(
    net::RequestClient& client, const std::string& prefix, int d, int samples,
    const std::vector<int32_t>& prompt, const spec::SamplingParams& params, int tokens,
    proto::VerifyMode mode, int k, uint64_t seed_offset, SpecTotals& totals) {
  std::vector<proto::SubmitRequest> submits(samples);
  for (int i = 0; i < samples; ++i) {
    const int n = d * samples + i;
    proto::SubmitRequest& submit = submits[i];
    submit.set_request_id(prefix + std::to_string(n));
    submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
    submit.mutable_params()->set_temperature(params.temperature);
    submit.mutable_params()->set_top_k(params.top_k);
    submit.mutable_params()->set_seed(1000003ull * n + seed_offset);
    submit.mutable_params()->set_max_tokens(tokens);
    submit.set_verify_mode(mode);
    submit.set_draft_k(k);
  }
  std::map<std::vector<int32_t>, int64_t> seen;
  const bool complete =
      testing::RunInWaves(client, submits, testing::Waves{.max_polls = 4000},
                          [&](const proto::SubmitRequest& submit, const net::GenerationResult& r) {
                            EXPECT_EQ(r.tokens.size(), static_cast<size_t>(tokens))
                                << submit.request_id() << " " << r.error;
                            if (r.tokens.size() != static_cast<size_t>(tokens)) return false;
                            ++seen[r.tokens];
                            totals.drafted += r.stats.drafted();
                            totals.accepted += r.stats.accepted();
                            totals.verified += r.stats.verified();
                            totals.tree_steps += r.stats.tree_steps();
                            return true;
                          });
  if (!complete) return std::nullopt;
  return seen;
}

// Two-stage (PassesOneOfTwoDraws): each draw of 2000 2-token continuations of `prompt`
// (DrawContinuations PREFIX, draft_k 3, seed offset 17) is checked against the target's
// exact law at 1e-3 (a continuation outside its support also fails the current test);
// the check fails only if two independent draws both fail, so its false alarm is 1e-6.
// Draws differ in their seeds; which path commits a token depends on timing, so no seed
// fixes a draw. Returns the requests' stats.
SpecTotals ExpectTwoTokenContinuationsFollowTheLaw(
    net::RequestClient& client, model::Transformer& target, const std::string& prefix,
    const std::vector<int32_t>& prompt, const spec::SamplingParams& params, proto::VerifyMode mode,
    const std::string& label) {
  const auto exact = ExactContinuationLaw(target, prompt, params, 2);
  constexpr int kSamples = 2000;
  SpecTotals totals;
  const auto draw = [&](int d) {
    const auto seen = DrawContinuations(client, prefix, d, kSamples, prompt, params,
                                        /*tokens=*/2, mode, /*k=*/3, /*seed_offset=*/17, totals);
    if (!seen.has_value()) return false;
    bool outside = false;
    for (const auto& [continuation, n] : *seen) outside |= exact.count(continuation) == 0;
    EXPECT_FALSE(outside) << "a continuation outside the target's support was committed";
    const spec::testing::ChiSquareResult result =
        spec::testing::ChiSquareTestAgainstLaw(exact, *seen);
    spec::testing::PrintChiSquare(label + ", draw " + std::to_string(d), result);
    return result.p_value > 1e-3;
  };
  EXPECT_TRUE(spec::testing::PassesOneOfTwoDraws(draw));
  return totals;
}

// Speculation was exercised both ways: some draft tokens accepted, some rejected.
void ExpectAcceptedAndRejected(const SpecTotals& totals) {
  EXPECT_GT(totals.accepted, 0u)
      << "the draft was never accepted: the test did not exercise acceptance";
  EXPECT_LT(totals.accepted, totals.verified)
      << "the draft was always accepted: the test did not exercise the residual";
}

// Sampled verification with a different draft model: every committed pair of
// tokens must follow the target's distribution (chi-square, significance 1e-6 in two stages),
// with the draft worker's speculation cache off or on (a cached block is
// verified like any other, so the distribution must not move), and with model
// drafter trees (issue 30: siblings drawn without replacement, verified by
// recursive rejection sampling in one tree forward).
void ExpectContinuationsFollowTheTarget(proto::VerifyMode mode, bool spec_cache,
                                        const std::string& label, bool trees = false) {
  const std::string target_path = WriteModel("dist-target", 1);
  // With the cache or trees, the draft is the target's own weights quantized coarser:
  // close to the target (its guesses at a correction can be right, so cached blocks
  // are verified; second siblings get accepted) yet different (so rejections and
  // corrections happen).
  const std::string draft_path = spec_cache || trees
                                     ? WriteModel("dist-draft-q4", 1, kernels::GgmlType::kQ4_0)
                                     : WriteModel("dist-draft", 7);
  TargetWithModelDrafter loaded;
  ASSERT_NO_FATAL_FAILURE(LoadTargetWithModelDrafter(target_path, draft_path, &loaded));

  tools::InProcessClusterOptions options;
  options.target = loaded.target.get();
  options.drafter = loaded.drafter.get();
  options.draft_engine.default_k = 3;
  options.draft_engine.spec_cache = spec_cache;
  options.draft_engine.cache.correction_candidates = 3;  // the rest of a top-4 support
  options.draft_engine.trees = trees;                     // --tree auto
  auto pipeline = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();

  const spec::SamplingParams params = TopFourParams();
  const std::vector<int32_t> prompt = {17, 42, 99};
  const SpecTotals totals = ExpectTwoTokenContinuationsFollowTheLaw(
      *pipeline->client, *loaded.target, "dist-", prompt, params, mode, label);
  EXPECT_GT(totals.drafted, 0u);
  if (trees) {
    std::printf("%s: %llu tree steps, %llu of %llu draft tokens accepted\n", label.c_str(),
                static_cast<unsigned long long>(totals.tree_steps),
                static_cast<unsigned long long>(totals.accepted),
                static_cast<unsigned long long>(totals.verified));
    EXPECT_GT(totals.tree_steps, 0u) << "no tree was verified: nothing was tested";
  }
  ExpectAcceptedAndRejected(totals);
  if (spec_cache) {
    pipeline->cluster->KillDraftWorker();
    const spec::SpeculationCacheCounters cache = pipeline->cluster->CacheCountersAfterKill();
    std::printf("%s: %llu of %llu lookups hit (%llu partial)\n", label.c_str(),
                static_cast<unsigned long long>(cache.hits + cache.partial_hits),
                static_cast<unsigned long long>(cache.lookups),
                static_cast<unsigned long long>(cache.partial_hits));
    EXPECT_GT(cache.hits + cache.partial_hits, 0u)
        << "no cached block was ever verified: " << cache.lookups << " lookups, "
        << cache.planned_blocks << " blocks planned, " << cache.branches << " branches, "
        << cache.drafted_tokens << " tokens pre-drafted, " << cache.dropped << " dropped";
  }
}

TEST(PipelineDistributionTest, RejectionSampledContinuationsFollowTheTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_REJECTION, false,
                                     "pipeline rejection, 2-token continuations");
}

TEST(PipelineDistributionTest, RejectionWithTheSpeculationCacheFollowsTheTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_REJECTION, true,
                                     "pipeline rejection + speculation cache");
}

TEST(PipelineDistributionTest, RejectionWithModelDrafterTreesFollowsTheTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_REJECTION, /*spec_cache=*/false,
                                     "rejection, model drafter trees", /*trees=*/true);
}

TEST(PipelineDistributionTest, CoupledWithTheSpeculationCacheFollowsTheTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_COUPLED, true,
                                     "pipeline coupled + speculation cache");
}

// Sampled 2-token continuations of `prompt` with the lookup drafter in the target
// leader (target_worker/local_drafts.h) follow the target's law (chi-square as
// above); `expect_trees`: some blocks were verified as trees (SpecStats.tree_steps).
void ExpectTargetsLookupKeepsTheLaw(model::Transformer& target, const std::vector<int32_t>& prompt,
                                    const spec::SamplingParams& params, bool expect_trees,
                                    const std::string& label) {
  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  tools::InProcessClusterOptions options;
  options.target = &target;
  options.target_drafter = &lookup;  // no draft worker: the target drafts
  options.draft_engine.default_k = 3;
  options.draft_engine.trees = expect_trees;  // --tree auto; off (chains) is the default
  auto pipeline = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  const SpecTotals totals = ExpectTwoTokenContinuationsFollowTheLaw(
      *pipeline->client, target, "local-", prompt, params, proto::VERIFY_MODE_REJECTION, label);
  EXPECT_GT(totals.drafted, 0u) << "the target's lookup drafter proposed nothing";
  ExpectAcceptedAndRejected(totals);
  if (expect_trees) {
    EXPECT_GT(totals.tree_steps, 0u) << "no tree was verified: nothing was tested";
  }
}

// The lookup drafter run inside the target leader (target_worker/local_drafts.h):
// its blocks are verified like a draft worker's, so sampled continuations keep
// the target's law. The prompt repeats its first token, so lookup proposes the
// token that followed it; that token is chosen with p in [0.1, 0.9] under the
// target, so the test sees acceptances and rejections both.
TEST(PipelineDistributionTest, TheTargetsOwnLookupDrafterKeepsTheTargetsLaw) {
  std::unique_ptr<model::Transformer> target;
  ASSERT_NO_FATAL_FAILURE(LoadTarget("local-target", &target));
  const spec::SamplingParams params = TopFourParams();
  std::vector<int32_t> prompt;
  for (int32_t b = 1; b < target->config().vocab_size && prompt.empty(); ++b) {
    const std::vector<int32_t> candidate = {17, b, 99, 17};
    const std::vector<float> first = FirstTokenProbs(*target, candidate, params);
    if (first[b] >= 0.1 && first[b] <= 0.9) prompt = candidate;
  }
  ASSERT_FALSE(prompt.empty()) << "no token the target samples with p in [0.1, 0.9]";
  ExpectTargetsLookupKeepsTheLaw(*target, prompt, params, /*expect_trees=*/false,
                                 "target's own lookup drafter");
}

// Point-mass trees (issue 30): "17" is followed by b and by c earlier in the prompt,
// so lookup's trie has two candidates at its root, which the target verifies by
// sequential point-mass rejection (runtime/spec/tree_verify.h) in one tree forward.
// b and c are chosen each with p >= 0.1 and together <= 0.9, so the first
// candidate, the second and the correction all commit.
TEST(PipelineDistributionTest, LookupTreesKeepTheTargetsLaw) {
  TwoCandidateSetup setup;
  ASSERT_NO_FATAL_FAILURE(SetUpTwoCandidates("tree-target", &setup));
  ExpectTargetsLookupKeepsTheLaw(*setup.target, setup.prompt, setup.params, /*expect_trees=*/true,
                                 "lookup trees in the target");
}

// Pipelined trees under sampling (issue 30): the draft worker drafts the next block
// past a tree's first path while the tree is verified (draft_worker/draft_engine.h,
// "Trees"); the target keeps that block only when it accepts the whole first path (the
// bonus forfeited), else starts a new epoch. Rejection mode, `tokens`-token
// continuations of `prompt` with blocks of depth <= k, through the whole pipeline with
// every data-plane message delayed (so the block overhead is measured and pipelining
// pays): the committed continuations must follow the target's law (chi-square,
// PassesOneOfTwoDraws: 1e-3 per draw, 1e-6 in all), and the same counts must fail
// against `wrong_law` (a deliberately wrong rule), so the harness can tell.
void ExpectPipelinedTreesKeepTheLaw(model::Transformer& target, spec::Drafter& drafter,
                                    const std::vector<int32_t>& prompt,
                                    const spec::SamplingParams& params, int tokens, int k,
                                    const std::map<std::vector<int32_t>, double>& wrong_law,
                                    const std::string& label) {
  const auto law = ExactContinuationLaw(target, prompt, params, tokens);
  tools::InProcessClusterOptions options;
  options.target = &target;
  options.drafter = &drafter;
  options.draft_engine.trees = true;           // --tree auto
  options.draft_engine.lookahead_blocks = 2;   // trees may be pipelined
  options.data_faults = net::FaultOptions{
      .delay_probability = 1.0, .max_delay = absl::Milliseconds(12), .seed = 11};
  auto pipeline = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  constexpr int kSamples = 2000;
  SpecTotals totals;
  const auto draw = [&](int d) {
    const auto seen = DrawContinuations(*pipeline->client, "piped-", d, kSamples, prompt, params,
                                        tokens, proto::VERIFY_MODE_REJECTION, k,
                                        /*seed_offset=*/29, totals);
    if (!seen.has_value()) return false;
    const spec::testing::ChiSquareResult result =
        spec::testing::ChiSquareTestAgainstLaw(law, *seen);
    spec::testing::PrintChiSquare(label + ", draw " + std::to_string(d), result);
    const spec::testing::ChiSquareResult wrong =
        spec::testing::ChiSquareTestAgainstLaw(wrong_law, *seen);
    spec::testing::PrintChiSquare("  the same counts vs the wrong rule's law", wrong);
    EXPECT_LT(wrong.p_value, 1e-3) << label << ": the harness cannot tell the wrong rule";
    return result.p_value > 1e-3;
  };
  EXPECT_TRUE(spec::testing::PassesOneOfTwoDraws(draw));
  pipeline->cluster->KillDraftWorker();
  const draft::DraftCounters counters = pipeline->cluster->DraftCountersAfterKill();
  std::printf(
      "%s: %llu tree blocks, %llu blocks past trees, %llu tree steps, %llu of %llu "
      "draft tokens accepted\n",
      label.c_str(), static_cast<unsigned long long>(counters.tree_blocks_sent),
      static_cast<unsigned long long>(counters.blocks_past_trees),
      static_cast<unsigned long long>(totals.tree_steps),
      static_cast<unsigned long long>(totals.accepted),
      static_cast<unsigned long long>(totals.verified));
  EXPECT_GT(totals.tree_steps, 0u) << "no tree was verified: nothing was tested";
  EXPECT_GT(counters.blocks_past_trees, 0u)
      << "no block was drafted past a tree: pipelining was not tested";
  ExpectAcceptedAndRejected(totals);
}

// The first token's law under a deliberately wrong point-mass tree rule at the root:
// candidates tried in order, each accepted with its own p (not its share of what the
// siblings before it left), the correction drawn from p (not the residual). Exact
// would be p itself.
std::vector<double> NoResidualFirstRow(const std::vector<float>& p,
                                       const std::vector<int32_t>& candidates) {
  std::vector<double> row(p.size(), 0.0);
  double reach = 1.0;  // P(every candidate before was rejected)
  for (const int32_t c : candidates) {
    row[c] += reach * p[c];
    reach *= 1.0 - p[c];
  }
  for (size_t v = 0; v < p.size(); ++v) row[v] += reach * p[v];
  return row;
}

// Point-mass trees from the lookup drafter on the draft worker, pipelined: the prompt
// has "17" followed by b and by c, so the tree's root has two candidates; each of b, c
// has p >= 0.1 under the target and together <= 0.9, so first candidate, second
// candidate and correction all commit, and a block drafted past the first path
// (b or c, then 99) is queued behind the tree.
TEST(PipelineDistributionTest, PipelinedLookupTreesKeepTheTargetsLaw) {
  TwoCandidateSetup setup;
  ASSERT_NO_FATAL_FAILURE(SetUpTwoCandidates("piped-tree-target", &setup));
  model::Transformer& target = *setup.target;
  const spec::SamplingParams& params = setup.params;
  const std::vector<int32_t>& prompt = setup.prompt;
  constexpr int kTokens = 3;
  const std::vector<float> first = FirstTokenProbs(target, prompt, params);
  // The wrong rule's law with b tried first (with c first it is as far off).
  const std::vector<double> wrong_row = NoResidualFirstRow(first, {setup.b, setup.c});
  const auto wrong_law = ExactContinuationLaw(target, prompt, params, kTokens, &wrong_row);
  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  ExpectPipelinedTreesKeepTheLaw(target, lookup, prompt, params, kTokens, /*k=*/2, wrong_law,
                                 "pipelined lookup trees, 3-token continuations");
}

// Sampled model-drafter trees (siblings drawn without replacement, recursive rejection
// sampling), pipelined: the draft is the target's weights quantized coarser (close, so
// whole first paths are accepted and the block behind is verified; different, so
// rejections happen). The wrong rule, as for lookup trees: the root's candidates (here
// the draft's two likeliest first tokens) each accepted with its own p, the correction
// drawn from p rather than the residual (a law on the target's own support).
TEST(PipelineDistributionTest, PipelinedModelDrafterTreesKeepTheTargetsLaw) {
  const std::string target_path = WriteModel("piped-model-target", 1);
  const std::string draft_path = WriteModel("piped-model-draft-q4", 1, kernels::GgmlType::kQ4_0);
  TargetWithModelDrafter loaded;
  ASSERT_NO_FATAL_FAILURE(LoadTargetWithModelDrafter(target_path, draft_path, &loaded));
  auto draft_model = model::Transformer::Load(draft_path, {.threads = 1});
  ASSERT_TRUE(draft_model.ok()) << draft_model.status();
  ASSERT_TRUE(loaded.drafter->ProposesTrees());
  const spec::SamplingParams params = TopFourParams();
  constexpr int kTokens = 3;
  const std::vector<int32_t> prompt = {17, 42, 99};
  const std::vector<float> q = FirstTokenProbs(**draft_model, prompt, params);
  std::vector<int32_t> by_q(q.size());
  std::iota(by_q.begin(), by_q.end(), 0);
  std::partial_sort(by_q.begin(), by_q.begin() + 2, by_q.end(),
                    [&](int32_t x, int32_t y) { return q[x] > q[y]; });
  const std::vector<double> wrong_row =
      NoResidualFirstRow(FirstTokenProbs(*loaded.target, prompt, params), {by_q[0], by_q[1]});
  const auto wrong_law = ExactContinuationLaw(*loaded.target, prompt, params, kTokens, &wrong_row);
  ExpectPipelinedTreesKeepTheLaw(*loaded.target, *loaded.drafter, prompt, params, kTokens, /*k=*/2,
                                 wrong_law, "pipelined model drafter trees, 3-token continuations");
}

// Dropped, delayed and reordered blocks and results: every request still
// finishes, with exactly the target's greedy output.
TEST(PipelineFaultTest, GreedyOutputSurvivesDropsDelaysAndReorders) {
  const std::string path = WriteModel("fault-target", 3);
  // The same model as its own draft: its blocks are always right, so the
  // faults alone decide what goes wrong.
  TargetWithModelDrafter loaded;
  ASSERT_NO_FATAL_FAILURE(LoadTargetWithModelDrafter(path, path, &loaded));
  tools::InProcessClusterOptions options;
  options.target = loaded.target.get();
  options.drafter = loaded.drafter.get();
  options.target_engine.block_wait = absl::Milliseconds(30);
  options.data_faults = net::FaultOptions{.drop_probability = 0.15,
                                          .delay_probability = 0.2,
                                          .max_delay = absl::Milliseconds(5),
                                          .reorder_probability = 0.15,
                                          .seed = 99};
  auto pipeline = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  const std::vector<std::vector<int32_t>> prompts = {
      {3, 4, 5}, {250, 1, 250, 1}, {77}, {9, 9, 9, 9, 9, 9}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    proto::SubmitRequest submit;
    submit.set_request_id("fault-" + std::to_string(i));
    submit.mutable_prompt_tokens()->Assign(prompts[i].begin(), prompts[i].end());
    submit.mutable_params()->set_temperature(0.0f);
    submit.mutable_params()->set_max_tokens(40);
    submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
    submit.set_draft_k(4);
    ASSERT_TRUE(pipeline->client->Submit(submit).ok());
  }
  for (int round = 0; round < 3000; ++round) {
    bool done = true;
    for (size_t i = 0; i < prompts.size(); ++i)
      done &= pipeline->client->Done("fault-" + std::to_string(i));
    if (done) break;
    ASSERT_TRUE(pipeline->client->Poll(absl::Milliseconds(20)).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = "fault-" + std::to_string(i);
    ASSERT_TRUE(pipeline->client->Done(id)) << id << " hung";
    EXPECT_EQ(pipeline->client->Result(id).tokens,
              testing::PlainGreedy(*loaded.target, prompts[i], 40))
        << id;
  }
}

}  // namespace
}  // namespace splitspec
