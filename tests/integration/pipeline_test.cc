// The whole speculative pipeline in one process (coordinator, target worker and
// draft worker as threads over inproc:// channels) on a tiny random model.
#include <unistd.h>

#include <map>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/spec/lookup_drafter.h"
#include "runtime/spec/ngram_drafter.h"
#include "runtime/spec/sampling.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/in_process_pipeline.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

constexpr int kMaxTokens = 24;

// kv_cache_type q8_0: heads of 32 (the q8_0 cache's block), as two heads of 64 / 2.
std::string TinyModelPath(const std::string& name,
                          model::KvCacheType kv_cache_type = model::KvCacheType::kF16) {
  model::TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  if (kv_cache_type == model::KvCacheType::kQ8_0) {
    options.n_heads = 2;
    options.n_kv_heads = 1;
  }
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name + ".gguf";
  EXPECT_TRUE(model::WriteTinyModel(options, path).ok());
  return path;
}

std::unique_ptr<model::Transformer> LoadTinyModel(const std::string& name) {
  auto loaded = model::Transformer::Load(TinyModelPath(name), {.threads = 1});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return *std::move(loaded);
}

proto::SubmitRequest GreedyRequest(const std::string& id, const std::vector<int32_t>& prompt) {
  proto::SubmitRequest submit;
  submit.set_request_id(id);
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.mutable_params()->set_temperature(0.0f);
  submit.mutable_params()->set_max_tokens(kMaxTokens);
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_draft_k(4);
  return submit;
}

// A tiny model (TinyModelPath NAME) and options that draft for it with the n-gram
// drafter on a draft worker; a test may change the options before it starts them.
struct NgramSetup {
  explicit NgramSetup(const std::string& name) : model(LoadTinyModel(name)) {
    options.target = model.get();
    options.drafter = &ngram;
  }
  NgramSetup(const NgramSetup&) = delete;  // options points at ngram
  NgramSetup& operator=(const NgramSetup&) = delete;

  std::unique_ptr<model::Transformer> model;
  spec::NgramDrafter ngram{spec::NgramDrafterConfig{}};
  tools::InProcessClusterOptions options;
};

// A tiny model (TinyModelPath NAME with the KV cache `kv_cache_type`) and the drafter
// the DrafterSpec `drafter_name` names for it ("model": the model itself; "none": null).
struct ModelWithDrafter {
  std::unique_ptr<model::Transformer> model;
  std::unique_ptr<model::Tokenizer> tokenizer;  // the drafter's view of the vocabulary
  std::unique_ptr<spec::Drafter> drafter;
};

void LoadModelWithDrafter(const std::string& name, const std::string& drafter_name,
                          model::KvCacheType kv_cache_type, ModelWithDrafter* out) {
  const std::string path = TinyModelPath(name, kv_cache_type);
  auto loaded = model::Transformer::Load(path, {.threads = 1, .kv_cache_type = kv_cache_type});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  out->model = *std::move(loaded);
  auto tokenizer = model::LoadTokenizerFromGguf(out->model->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  out->tokenizer = std::make_unique<model::Tokenizer>(*std::move(tokenizer));
  auto spec = spec::ParseDrafterSpec(drafter_name, path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto drafter =
      spec::MakeDrafter(*spec, path, out->tokenizer.get(), out->model->config().vocab_size, 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  out->drafter = *std::move(drafter);
}

// Greedy requests PREFIXn (GreedyRequest, n counting from 0) for each k of `ks` (its
// draft_k) and each of `prompts`, one at a time: each must succeed with exactly plain
// greedy's tokens. Returns their results, in that order; it stops at a failed request
// (which fails the current test), so a short result means that.
std::vector<net::GenerationResult> GenerateGreedyExpectingPlain(
    net::RequestClient& client, model::Transformer& model, const std::string& prefix,
    const std::vector<std::vector<int32_t>>& prompts, const std::vector<int>& ks) {
  std::vector<net::GenerationResult> results;
  int n = 0;
  for (const int k : ks) {
    for (const std::vector<int32_t>& prompt : prompts) {
      proto::SubmitRequest submit = GreedyRequest(prefix + std::to_string(n++), prompt);
      submit.set_draft_k(k);
      auto got = client.Generate(submit, absl::Seconds(60));
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return results;
      EXPECT_EQ(got->tokens, testing::PlainGreedy(model, prompt, kMaxTokens))
          << submit.request_id();
      results.push_back(*std::move(got));
    }
  }
  return results;
}

// Prompts with repetition, so prompt lookup finds matches.
std::vector<std::vector<int32_t>> TestPrompts() {
  return {{10, 20, 30, 40, 10, 20, 30}, {5, 6, 7, 5, 6, 7, 5, 6}, {100, 3, 100, 3, 100}, {42}};
}

struct Mode {
  std::string name;
  std::string drafter;  // a DrafterSpec name: none, ngram, model (the target itself), layerskip:1
  int lookahead;
  bool spec_cache = false;  // the draft worker's speculation cache
  // The target's KV cache: with q8_0 the target is a different model, and speculation
  // must reproduce that model's greedy output (the drafter keeps its own f16 caches).
  model::KvCacheType kv_cache_type = model::KvCacheType::kF16;
};

class PipelineGreedyTest : public ::testing::TestWithParam<Mode> {};

TEST_P(PipelineGreedyTest, SpeculativeGreedyEqualsPlainGreedyTokenForToken) {
  ModelWithDrafter loaded;
  ASSERT_NO_FATAL_FAILURE(LoadModelWithDrafter(
      "pipeline-greedy-" + GetParam().name, GetParam().drafter, GetParam().kv_cache_type, &loaded));
  const bool with_draft = loaded.drafter != nullptr;
  tools::InProcessClusterOptions options;
  options.target = loaded.model.get();
  options.drafter = loaded.drafter.get();
  options.draft_engine.lookahead_blocks = GetParam().lookahead;
  options.draft_engine.spec_cache = GetParam().spec_cache;
  // The cache's blocks are what is tested: pre-draft for every block, whether or
  // not the policy would find it pays on this machine.
  options.draft_engine.cache_guard = false;
  auto running = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(running.ok()) << running.status();

  uint64_t drafted = 0;
  for (const net::GenerationResult& got : GenerateGreedyExpectingPlain(
           *running->client, *loaded.model, "greedy-", TestPrompts(), {/*GreedyRequest's*/ 4})) {
    EXPECT_EQ(got.finish_reason, proto::FINISH_REASON_LENGTH);
    EXPECT_TRUE(got.error.empty()) << got.error;
    drafted += got.stats.drafted();
    EXPECT_LE(got.stats.accepted(), got.stats.verified());
  }
  if (with_draft) {
    EXPECT_GT(drafted, 0u) << "the drafter never proposed anything";
  }
  if (GetParam().spec_cache) {
    running->cluster->KillDraftWorker();
    const spec::SpeculationCacheCounters cache = running->cluster->CacheCountersAfterKill();
    EXPECT_GT(cache.lookups, 0u) << "the cache was never consulted";
    EXPECT_GT(cache.hits + cache.partial_hits, 0u) << "the cache never hit: nothing was tested";
    EXPECT_GT(running->cluster->DraftCountersAfterKill().cache_blocks_sent, 0u);
  }
}

// The speculation policy (draft_k 0) changes how much is drafted, never what is committed,
// including the k = 0 steps while speculation is off for a request.
TEST(PipelineTest, SpeculationPolicyKeepsGreedyOutputExact) {
  NgramSetup ngram_setup("pipeline-adaptive");
  auto& model = ngram_setup.model;
  auto running = testing::StartPipelineWithClient(ngram_setup.options);
  ASSERT_TRUE(running.ok()) << running.status();
  GenerateGreedyExpectingPlain(*running->client, *model, "adaptive-", TestPrompts(), {0});
}

// Tree blocks (issue 30): the lookup drafter's tries, sent because the target runs
// trees, verified in one tree forward, commit exactly plain greedy's tokens, with
// the policy's k (draft_k 0) and a fixed k, through a draft worker and through the
// target's own drafter (target_worker/local_drafts.h). The prompts repeat "a b"
// with different continuations, so the tries branch at once (rank 2 is untried,
// so the first blocks are trees).
TEST(PipelineTest, LookupTreesKeepGreedyOutputExact) {
  auto model = LoadTinyModel("pipeline-trees");
  const std::vector<std::vector<int32_t>> prompts = {{10, 20, 30, 10, 20, 40, 10, 20, 50, 10, 20},
                                                     {5, 6, 7, 8, 5, 6, 9, 8, 5, 6, 7, 3, 5, 6},
                                                     {100, 3, 100, 4, 100, 3, 100, 5, 100}};
  for (const bool in_target : {false, true}) {
    SCOPED_TRACE(in_target ? "the target's own drafter" : "a draft worker");
    spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
    tools::InProcessClusterOptions options;
    options.target = model.get();
    (in_target ? options.target_drafter : options.drafter) = &lookup;
    options.draft_engine.trees = true;  // --tree auto (chains are the default)
    auto running = testing::StartPipelineWithClient(options);
    ASSERT_TRUE(running.ok()) << running.status();
    uint64_t tree_steps = 0;
    for (const net::GenerationResult& got :
         GenerateGreedyExpectingPlain(*running->client, *model, "tree-", prompts, {0, 4})) {
      EXPECT_TRUE(got.error.empty()) << got.error;
      EXPECT_LE(got.stats.accepted(), got.stats.verified());
      tree_steps += got.stats.tree_steps();
    }
    EXPECT_GT(tree_steps, 0u) << "no tree was verified: nothing was tested";
    if (!in_target) {
      running->cluster->KillDraftWorker();
      EXPECT_GT(running->cluster->DraftCountersAfterKill().tree_blocks_sent, 0u);
    }
  }
}

// Pipelined trees: every data message is delayed (up to 4 ms, so some also arrive out
// of order), which the draft worker measures as a block's round trip; once that costs
// more than the bonus a pipelined tree forfeits, the tree rule pipelines trees and the
// draft worker drafts the next block past each tree's first path (the target keeps it
// when that whole path is accepted, and drops it otherwise). Greedy output stays
// exactly plain greedy's.
TEST(PipelineTest, PipelinedLookupTreesKeepGreedyOutputExact) {
  auto model = LoadTinyModel("pipeline-trees-pipelined");
  const std::vector<std::vector<int32_t>> prompts = {{10, 20, 30, 10, 20, 40, 10, 20, 50, 10, 20},
                                                     {5, 6, 7, 8, 5, 6, 9, 8, 5, 6, 7, 3, 5, 6},
                                                     {100, 3, 100, 4, 100, 3, 100, 5, 100}};
  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  tools::InProcessClusterOptions options;
  options.target = model.get();
  options.drafter = &lookup;
  options.draft_engine.trees = true;
  options.draft_engine.lookahead_blocks = 2;
  options.data_faults = net::FaultOptions{
      .delay_probability = 1.0, .max_delay = absl::Milliseconds(4), .seed = 7};
  auto running = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(running.ok()) << running.status();
  for (const net::GenerationResult& got :  // the prompts three times over, k = 4
       GenerateGreedyExpectingPlain(*running->client, *model, "piped-", prompts, {4, 4, 4})) {
    EXPECT_TRUE(got.error.empty()) << got.error;
  }
  running->cluster->KillDraftWorker();
  const draft::DraftCounters counters = running->cluster->DraftCountersAfterKill();
  EXPECT_GT(counters.tree_blocks_sent, 0u);
  EXPECT_GT(counters.blocks_past_trees, 0u) << "no block was drafted past a tree: nothing was tested";
}

// Model drafters' trees (issue 30; runtime/spec/model_drafter.h): a layer-skip
// draft of the target grows trees by path value on the CPU, one draft forward per
// level; verified in one tree forward they commit exactly plain greedy's tokens,
// with the policy's k and a fixed k (rank 2 is untried, so the first blocks are trees).
TEST(PipelineTest, ModelDrafterTreesKeepGreedyOutputExact) {
  ModelWithDrafter loaded;
  ASSERT_NO_FATAL_FAILURE(LoadModelWithDrafter("pipeline-model-trees", "layerskip:1",
                                               model::KvCacheType::kF16, &loaded));
  ASSERT_TRUE(loaded.drafter->ProposesTrees());
  tools::InProcessClusterOptions options;
  options.target = loaded.model.get();
  options.drafter = loaded.drafter.get();
  options.draft_engine.trees = true;  // --tree auto
  auto running = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(running.ok()) << running.status();
  uint64_t tree_steps = 0;
  for (const net::GenerationResult& got : GenerateGreedyExpectingPlain(
           *running->client, *loaded.model, "model-tree-", TestPrompts(), {0, 4})) {
    EXPECT_TRUE(got.error.empty()) << got.error;
    tree_steps += got.stats.tree_steps();
  }
  EXPECT_GT(tree_steps, 0u) << "no tree was verified: nothing was tested";
  running->cluster->KillDraftWorker();
  EXPECT_GT(running->cluster->DraftCountersAfterKill().tree_blocks_sent, 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, PipelineGreedyTest,
                         ::testing::Values(Mode{"target_only", "none", 2},
                                           Mode{"ngram_overlapped", "ngram", 2},
                                           Mode{"ngram_sequential", "ngram", 1},
                                           Mode{"lookup_overlapped", "lookup", 2},
                                           Mode{"lookup_sequential", "lookup", 1},
                                           Mode{"self_draft_overlapped", "model", 2},
                                           Mode{"self_draft_sequential", "model", 1},
                                           Mode{"layerskip_overlapped", "layerskip:1", 2},
                                           Mode{"layerskip_sequential", "layerskip:1", 1},
                                           Mode{"ngram_cache", "ngram", 1, true},
                                           Mode{"self_draft_cache", "model", 1, true},
                                           Mode{"layerskip_cache", "layerskip:1", 1, true},
                                           Mode{"target_only_q8_0_kv", "none", 2, false,
                                                model::KvCacheType::kQ8_0},
                                           Mode{"ngram_overlapped_q8_0_kv", "ngram", 2, false,
                                                model::KvCacheType::kQ8_0},
                                           Mode{"self_draft_sequential_q8_0_kv", "model", 1,
                                                false, model::KvCacheType::kQ8_0},
                                           Mode{"lookup_overlapped_q8_0_kv", "lookup", 2, false,
                                                model::KvCacheType::kQ8_0}),
                         [](const auto& info) { return info.param.name; });

TEST(PipelineTest, SixteenConcurrentRequestsAllFinishExactly) {
  NgramSetup ngram_setup("pipeline-concurrent");
  auto& model = ngram_setup.model;
  auto running = testing::StartPipelineWithClient(ngram_setup.options);
  ASSERT_TRUE(running.ok()) << running.status();
  auto& client = running->client;
  std::map<std::string, std::vector<int32_t>> prompts;
  for (int r = 0; r < 16; ++r) {
    std::vector<int32_t> prompt = {r + 3, 2 * r + 7, r + 3, 2 * r + 7, 11};
    const std::string id = "concurrent-" + std::to_string(r);
    prompts[id] = prompt;
    ASSERT_TRUE(client->Submit(GreedyRequest(id, prompt)).ok());
  }
  for (int round = 0; round < 2000; ++round) {
    bool all_done = true;
    for (const auto& [id, prompt] : prompts) all_done &= client->Done(id);
    if (all_done) break;
    ASSERT_TRUE(client->Poll(absl::Milliseconds(50)).ok());
  }
  for (const auto& [id, prompt] : prompts) {
    ASSERT_TRUE(client->Done(id)) << id;
    EXPECT_EQ(client->Result(id).tokens, testing::PlainGreedy(*model, prompt, kMaxTokens)) << id;
  }
}

TEST(PipelineTest, KilledDraftWorkerLosesNoRequestAndOutputStaysExact) {
  NgramSetup ngram_setup("pipeline-kill-draft");
  auto& model = ngram_setup.model;
  ngram_setup.options.membership.heartbeat_interval = absl::Milliseconds(20);
  ngram_setup.options.target_engine.block_wait = absl::Milliseconds(50);
  auto running = testing::StartPipelineWithClient(ngram_setup.options);
  ASSERT_TRUE(running.ok()) << running.status();
  auto& cluster = running->cluster;
  auto& client = running->client;
  const std::vector<int32_t> prompt = {10, 20, 30, 40, 10, 20, 30};
  proto::SubmitRequest submit = GreedyRequest("kill-draft", prompt);
  submit.mutable_params()->set_max_tokens(400);
  ASSERT_TRUE(client->Submit(submit).ok());
  // Let some tokens through, then the draft worker dies mid-request.
  for (int round = 0; round < 1000 && client->Result("kill-draft").tokens.empty(); ++round) {
    ASSERT_TRUE(client->Poll(absl::Milliseconds(5)).ok());
  }
  cluster->KillDraftWorker();
  ASSERT_FALSE(client->Done("kill-draft"))
      << "finished before the draft worker died: nothing tested";
  for (int round = 0; round < 2000 && !client->Done("kill-draft"); ++round) {
    ASSERT_TRUE(client->Poll(absl::Milliseconds(50)).ok());
  }
  ASSERT_TRUE(client->Done("kill-draft"));
  EXPECT_EQ(client->Result("kill-draft").tokens, testing::PlainGreedy(*model, prompt, 400));
  EXPECT_EQ(client->Result("kill-draft").finish_reason, proto::FINISH_REASON_LENGTH);
}

TEST(PipelineTest, PromptBeyondContextIsRefusedWithReason) {
  auto model = LoadTinyModel("pipeline-refuse");
  tools::InProcessClusterOptions options;
  options.target = model.get();
  auto running = testing::StartPipelineWithClient(options);
  ASSERT_TRUE(running.ok()) << running.status();
  auto& client = running->client;
  std::vector<int32_t> prompt(600, 5);  // the tiny model's context is 512
  auto got = client->Generate(GreedyRequest("too-long", prompt), absl::Seconds(30));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->finish_reason, proto::FINISH_REASON_ERROR);
  EXPECT_NE(got->error.find("exceeds the context length 512"), std::string::npos) << got->error;
}

}  // namespace
}  // namespace splitspec
