// Losslessness of sampled verification through the in-process pipeline with the
// target and the model drafter on cuda:0 (the GPU twin of
// tests/integration/pipeline_distribution_test.cc): the committed pairs of tokens
// follow the CUDA target's own two-token distribution, computed exactly from its
// logits, by a chi-square test at significance 1e-6 (two draws of 1e-3, see
// PassesOneOfTwoDraws), for rejection and coupled verification. Skips without a device.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/spec/sampling.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/chi_square.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

constexpr model::DeviceSpec kCuda0{model::DeviceSpec::Kind::kCuda, 0};

std::string WriteModel(const std::string& name, uint32_t seed, kernels::GgmlType weight_type) {
  model::TinyModelOptions options;
  options.weight_type = weight_type;
  options.seed = seed;
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-cuda-" + name + ".gguf";
  EXPECT_TRUE(model::WriteTinyModel(options, path).ok());
  return path;
}

// p over the first two generated tokens, exactly, from the (CUDA) target's own logits.
std::map<std::pair<int, int>, double> ExactTwoTokenDistribution(
    model::Transformer& model, const std::vector<int32_t>& prompt,
    const spec::SamplingParams& params) {
  const int vocab = model.config().vocab_size;
  auto probs_after = [&](const std::vector<int32_t>& tokens) {
    auto cache = model.NewCache();
    model::ForwardOutput out;
    EXPECT_TRUE(model.Forward({{cache.get(), tokens, model::LogitsMode::kLast}}, &out).ok());
    std::vector<float> p(vocab);
    EXPECT_TRUE(
        spec::LogitsToProbs(params, absl::MakeConstSpan(out.Row(0, 0), vocab), absl::MakeSpan(p))
            .ok());
    return p;
  };
  std::map<std::pair<int, int>, double> exact;
  const std::vector<float> first = probs_after(prompt);
  for (int a = 0; a < vocab; ++a) {
    if (first[a] == 0.0f) continue;
    std::vector<int32_t> extended = prompt;
    extended.push_back(a);
    const std::vector<float> second = probs_after(extended);
    for (int b = 0; b < vocab; ++b) {
      if (second[b] > 0.0f) exact[{a, b}] = static_cast<double>(first[a]) * second[b];
    }
  }
  return exact;
}

class CudaPipelineDistributionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
};

// Target (Q8_0) and a model draft on cuda:0. With the speculation cache the draft is
// the target's weights quantized coarser (Q4_0: close enough that cached blocks get
// verified, different enough that rejections happen); without it, a different model.
void ExpectContinuationsFollowTheTarget(proto::VerifyMode mode, bool spec_cache,
                                        const std::string& label) {
  const std::string target_path = WriteModel("dist-target", 1, kernels::GgmlType::kQ8_0);
  const std::string draft_path = spec_cache
                                     ? WriteModel("dist-draft-q4", 1, kernels::GgmlType::kQ4_0)
                                     : WriteModel("dist-draft", 7, kernels::GgmlType::kQ8_0);
  auto target = model::Transformer::Load(target_path, {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(target.ok()) << target.status();
  auto tokenizer = model::LoadTokenizerFromGguf((*target)->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto drafter = spec::ModelDrafter::Load(draft_path, *tokenizer, (*target)->config().vocab_size,
                                          {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  // A CUDA draft runs no token trees, so it proposes chains and says so.
  EXPECT_FALSE((*drafter)->ProposesTrees());

  tools::InProcessClusterOptions options;
  options.target = target->get();
  options.drafter = drafter->get();
  options.draft_engine.default_k = 3;
  options.draft_engine.spec_cache = spec_cache;
  options.draft_engine.cache.correction_candidates = 3;  // the rest of a top-4 support
  auto cluster = tools::InProcessCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  ASSERT_TRUE(client.ok()) << client.status();

  spec::SamplingParams params;
  params.temperature = 1.0f;
  params.top_k = 4;  // a small support keeps the cell count (and the test) small
  const std::vector<int32_t> prompt = {17, 42, 99};
  const auto exact = ExactTwoTokenDistribution(**target, prompt, params);
  ASSERT_GT(exact.size(), 1u);

  // Each draw is checked at 1e-3; the test fails only if two independent draws both
  // fail (false alarm 1e-6). Timing decides which path commits a token, so no seed
  // fixes a draw.
  constexpr int kSamples = 2000;
  constexpr int kBatch = 50;
  uint64_t drafted = 0, accepted = 0, verified = 0;
  const auto draw = [&](int d) {
    std::map<std::pair<int, int>, int64_t> seen;
    for (int batch = 0; batch < kSamples / kBatch; ++batch) {
      std::vector<std::string> ids;
      for (int i = 0; i < kBatch; ++i) {
        const int n = d * kSamples + batch * kBatch + i;
        proto::SubmitRequest submit;
        submit.set_request_id("cuda-dist-" + std::to_string(n));
        submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
        submit.mutable_params()->set_temperature(params.temperature);
        submit.mutable_params()->set_top_k(params.top_k);
        submit.mutable_params()->set_seed(1000003ull * n + 17);
        submit.mutable_params()->set_max_tokens(2);
        submit.set_verify_mode(mode);
        submit.set_draft_k(3);
        EXPECT_TRUE((*client)->Submit(submit).ok());
        ids.push_back(submit.request_id());
      }
      for (int round = 0; round < 4000; ++round) {
        bool done = true;
        for (const std::string& id : ids) done &= (*client)->Done(id);
        if (done) break;
        EXPECT_TRUE((*client)->Poll(absl::Milliseconds(20)).ok());
      }
      for (const std::string& id : ids) {
        EXPECT_TRUE((*client)->Done(id)) << id;
        const net::GenerationResult& r = (*client)->Result(id);
        EXPECT_EQ(r.tokens.size(), 2u) << id << " " << r.error;
        if (r.tokens.size() != 2u) return false;
        ++seen[{r.tokens[0], r.tokens[1]}];
        drafted += r.stats.drafted();
        accepted += r.stats.accepted();
        verified += r.stats.verified();
      }
    }
    std::vector<int64_t> counts;
    std::vector<double> expected;
    for (const auto& [pair, p] : exact) {
      counts.push_back(seen.count(pair) ? seen[pair] : 0);
      expected.push_back(p);
      seen.erase(pair);
    }
    EXPECT_TRUE(seen.empty()) << "a continuation outside the target's support was committed";
    const spec::testing::ChiSquareResult result = spec::testing::ChiSquareTest(counts, expected);
    spec::testing::PrintChiSquare(label + ", draw " + std::to_string(d), result);
    return result.p_value > 1e-3;
  };
  EXPECT_TRUE(spec::testing::PassesOneOfTwoDraws(draw));
  EXPECT_GT(drafted, 0u);
  EXPECT_GT(accepted, 0u) << "the draft was never accepted: the test did not exercise acceptance";
  EXPECT_LT(accepted, verified)
      << "the draft was always accepted: the test did not exercise the residual";
  if (spec_cache) {
    (*cluster)->KillDraftWorker();
    const spec::SpeculationCacheCounters cache = (*cluster)->CacheCountersAfterKill();
    std::printf("%s: %llu of %llu lookups hit\n", label.c_str(),
                static_cast<unsigned long long>(cache.hits + cache.partial_hits),
                static_cast<unsigned long long>(cache.lookups));
    EXPECT_GT(cache.hits + cache.partial_hits, 0u)
        << "no cached block was ever verified: " << cache.lookups << " lookups";
  }
}

TEST_F(CudaPipelineDistributionTest, RejectionSampledContinuationsFollowTheGpuTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_REJECTION, false,
                                     "cuda pipeline rejection, 2-token continuations");
}

TEST_F(CudaPipelineDistributionTest, CoupledContinuationsFollowTheGpuTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_COUPLED, false,
                                     "cuda pipeline coupled, 2-token continuations");
}

TEST_F(CudaPipelineDistributionTest, CoupledWithTheSpeculationCacheFollowsTheGpuTarget) {
  ExpectContinuationsFollowTheTarget(proto::VERIFY_MODE_COUPLED, true,
                                     "cuda pipeline coupled + speculation cache");
}

}  // namespace
}  // namespace splitspec
