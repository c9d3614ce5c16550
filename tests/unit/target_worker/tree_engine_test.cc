// TargetEngine with tree blocks (DraftBlock.parents) over a tiny real model: one tree
// forward, the tree rule, KeepPath of the accepted path, VerifyResult.accepted_nodes.
// Greedy tree blocks commit exactly plain greedy decoding, and the KV cache after each
// acceptance equals a cache built from the committed tokens only. A target that
// verifies chains only (a tensor-parallel group) verifies a tree's first path.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "target_worker/target_engine.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::target {
namespace {

constexpr uint64_t kDraftWorker = 7;

std::unique_ptr<model::Transformer> LoadTiny() {
  model::TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  auto file = model::GgufFile::FromBuffer(model::MakeTinyModel(options).Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto loaded = model::Transformer::FromFile(std::move(*file), {.threads = 2});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

// Plain greedy decoding of `n` tokens after `prompt`, one token per forward.
std::vector<int32_t> GreedyExtend(model::LanguageModel& m, const std::vector<int32_t>& prompt,
                                  int n) {
  std::vector<int32_t> tokens = prompt;
  auto cache = m.NewCache();
  std::vector<int32_t> next = prompt;
  for (int i = 0; i < n; ++i) {
    model::ForwardOutput out;
    EXPECT_TRUE(m.Forward({{cache.get(), next, model::LogitsMode::kLast}}, &out).ok());
    const float* row = out.Row(0, 0);
    const int best = static_cast<int>(std::max_element(row, row + out.vocab_size) - row);
    tokens.push_back(best);
    next = {best};
  }
  return tokens;
}

// The model without tree forwards (as a tensor-parallel group's leader is).
class ChainOnlyModel : public model::LanguageModel {
 public:
  explicit ChainOnlyModel(model::LanguageModel* m) : m_(m) {}
  const model::ModelConfig& config() const override { return m_->config(); }
  std::unique_ptr<model::KvCache> NewCache(int max_tokens) const override {
    return m_->NewCache(max_tokens);
  }
  absl::Status Forward(absl::Span<const model::SequenceInput> batch,
                       model::ForwardOutput* out) override {
    for (const model::SequenceInput& in : batch) {
      if (!in.tree_parents.empty())
        return absl::UnimplementedError("a tree reached ChainOnlyModel");
    }
    return m_->Forward(batch, out);
  }

 private:
  model::LanguageModel* m_;
};

proto::Assignment Assign(const std::vector<int32_t>& prompt, int max_tokens,
                         proto::VerifyMode mode = proto::VERIFY_MODE_GREEDY,
                         uint64_t draft_worker = kDraftWorker) {
  proto::Assignment a;
  a.set_request_id("r");
  a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
  a.set_draft_worker_id(draft_worker);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  if (mode == proto::VERIFY_MODE_REJECTION) {
    a.mutable_params()->set_temperature(1.0f);
    a.mutable_params()->set_seed(42);
  }
  a.set_verify_mode(mode);
  return a;
}

// The target decoding alone (no draft worker): the whole committed sequence.
std::vector<int32_t> AloneRun(model::LanguageModel* m, const std::vector<int32_t>& prompt,
                              int max_tokens, proto::VerifyMode mode) {
  TargetEngine engine(m, {});
  EXPECT_TRUE(engine.AddRequest(Assign(prompt, max_tokens, mode, /*draft_worker=*/0)).ok());
  std::vector<int32_t> sequence;
  const absl::Time now = absl::Now();
  for (int i = 0; i < 10 * max_tokens && engine.Find("r") != nullptr; ++i) {
    std::vector<TargetEvent> events;
    EXPECT_TRUE(engine.Step(now, &events).ok());
    for (const TargetEvent& e : events) {
      if (e.to_coordinator && e.result.full_sequence()) {
        sequence.assign(e.result.committed_tokens().begin(), e.result.committed_tokens().end());
      }
    }
  }
  return sequence;
}

// A tree at `start` whose path of truth[start ...] is not its first branch: a wrong
// first branch (2 nodes), then the truth's node with a wrong child and the truth's next
// `depth - 1` tokens, then a wrong sibling of the root's children. `bend` > 0 makes the
// truth path's node at that depth wrong (a correction there).
struct TreeBlock {
  std::vector<int32_t> tokens, parents;
  std::vector<int32_t> truth_nodes;  // the nodes carrying truth[start], truth[start + 1], ...
};

TreeBlock MakeTree(const std::vector<int32_t>& truth, int start, int depth, int bend, int vocab) {
  auto other = [&](int32_t t, int32_t avoid) {
    int32_t x = (t + 7) % vocab;
    if (x == avoid) x = (x + 1) % vocab;
    return x;
  };
  TreeBlock b;
  const int32_t t0 = truth[start];
  b.tokens = {other(t0, -1), 5};
  b.parents = {-1, 0};
  int32_t parent = -1;
  for (int d = 0; d < depth; ++d) {
    int32_t token = truth[start + d];
    if (d > 0 && d == bend) token = other(token, -1);
    const int32_t node = static_cast<int32_t>(b.tokens.size());
    b.tokens.push_back(token);
    b.parents.push_back(parent);
    if (d == 0) {  // a wrong child of the truth's first node, before its right one
      b.tokens.push_back(other(truth[start + 1], -1));
      b.parents.push_back(node);
    }
    if (d < bend || bend == 0) b.truth_nodes.push_back(node);
    parent = node;
  }
  b.tokens.push_back(other(t0, b.tokens[0]));  // the root's third child
  b.parents.push_back(-1);
  return b;
}

proto::DraftBlock Block(const TreeBlock& tree, uint64_t epoch, int start, uint64_t sequence,
                        bool point_mass_q = false) {
  proto::DraftBlock block;
  for (int32_t token : tree.tokens) {  // lookup's candidates in rejection mode: OneHot rows
    if (!point_mass_q) break;
    proto::SparseDistribution* q = block.add_q();
    q->add_token_ids(token);
    q->add_probs(1.0f);
  }
  block.set_request_id("r");
  block.set_epoch(epoch);
  block.set_start(static_cast<uint32_t>(start));
  block.set_block_sequence(sequence);
  block.mutable_tokens()->Assign(tree.tokens.begin(), tree.tokens.end());
  block.mutable_parents()->Assign(tree.parents.begin(), tree.parents.end());
  return block;
}

// Every row of both caches' valid positions, bitwise.
void ExpectSameCache(const model::KvCache& a, const model::KvCache& b) {
  ASSERT_EQ(a.length(), b.length());
  for (int l = 0; l < a.n_layers(); ++l) {
    for (int p = 0; p < a.length(); ++p) {
      for (int c = 0; c < a.kv_dim(); ++c) {
        ASSERT_EQ(a.KeyAt(l, p, c), b.KeyAt(l, p, c)) << "layer " << l << " position " << p;
        ASSERT_EQ(a.ValueAt(l, p, c), b.ValueAt(l, p, c)) << "layer " << l << " position " << p;
      }
    }
  }
}

class TreeEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = LoadTiny();
    ASSERT_NE(model_, nullptr);
  }

  // Drives one request with tree blocks until it finishes; each result is checked
  // against the tree it answered.
  // truth: what the target alone commits (at least prompt + kNew + 3 tokens).
  void RunTrees(model::LanguageModel* engine_model, bool expect_trees,
                proto::VerifyMode mode = proto::VERIFY_MODE_GREEDY,
                std::vector<int32_t> truth = {}) {
    const std::vector<int32_t> prompt = kPrompt;
    const int vocab = model_->config().vocab_size;
    if (truth.empty()) truth = GreedyExtend(*model_, prompt, kNew + 8);
    ASSERT_GE(truth.size(), prompt.size() + kNew + 3);
    TargetEngineOptions options;
    options.block_wait = absl::Hours(1);
    options.feed_wait = absl::ZeroDuration();
    TargetEngine engine(engine_model, options);
    ASSERT_TRUE(engine.AddRequest(Assign(prompt, kNew, mode)).ok());
    const bool point_mass_q = mode == proto::VERIFY_MODE_REJECTION;
    absl::Time now = absl::Now();
    std::vector<TargetEvent> events;
    // The prompt: its prefill leaves p pending (the first tree refeeds the root).
    for (int i = 0; i < 10 && engine.HasWork(now); ++i) ASSERT_TRUE(engine.Step(now, &events).ok());
    std::vector<int32_t> seen = prompt;
    uint64_t epoch = 0, sequence = 0;
    uint64_t nodes_sent = 0;
    int round = 0;
    while (engine.Find("r") != nullptr) {
      ASSERT_LT(round, 40) << "no progress";
      const int start = static_cast<int>(seen.size());
      const int bend = round % 3 == 1 ? 2 : 0;  // every third tree has a wrong node
      const TreeBlock tree = MakeTree(truth, start, 3, bend, vocab);
      ASSERT_EQ(engine.AddBlock(Block(tree, epoch, start, ++sequence, point_mass_q), "d"),
                BlockAdmission::kQueued);
      events.clear();
      ASSERT_TRUE(engine.Step(now, &events).ok());
      const proto::VerifyResult* result = nullptr;
      for (const TargetEvent& e : events) {
        if (e.to_coordinator) result = &e.result;
      }
      ASSERT_NE(result, nullptr) << "round " << round;
      if (result->full_sequence()) {
        seen.assign(result->committed_tokens().begin(), result->committed_tokens().end());
        break;
      }
      const std::vector<int32_t> nodes(result->accepted_nodes().begin(),
                                       result->accepted_nodes().end());
      if (expect_trees) {
        EXPECT_EQ(nodes, tree.truth_nodes) << "round " << round;
      } else {  // the first branch, a wrong token at once
        EXPECT_TRUE(nodes.empty()) << "round " << round;
      }
      EXPECT_EQ(result->accepted(), nodes.size());
      if (expect_trees) {
        // Each tree is one step; it counts the path positions it walked (the accepted
        // nodes and the rejected one), not its nodes: drafted == verified.
        EXPECT_EQ(result->stats().tree_steps(), static_cast<uint64_t>(round + 1));
        EXPECT_EQ(result->stats().drafted(), result->stats().verified()) << "round " << round;
        nodes_sent += tree.tokens.size();
        EXPECT_LT(result->stats().drafted(), nodes_sent) << "round " << round;
      }
      seen.insert(seen.end(), result->committed_tokens().begin(), result->committed_tokens().end());
      epoch = result->epoch();
      // The cache holds the committed tokens but the last (unfed), bitwise.
      if (const TargetRequest* request = engine.Find("r"); request != nullptr) {
        auto reference = model_->NewCache();
        model::ForwardOutput out;
        const std::vector<int32_t> fed(seen.begin(), seen.end() - 1);
        ASSERT_TRUE(model_->Forward({{reference.get(), fed, model::LogitsMode::kNone}}, &out).ok());
        ExpectSameCache(request->cache(), *reference);
      }
      ++round;
    }
    const std::vector<int32_t> want(truth.begin(), truth.begin() + prompt.size() + kNew);
    EXPECT_EQ(seen, want) << "tree speculation must commit what the target alone commits";
  }

  const std::vector<int32_t> kPrompt = {0, 72, 101, 108, 260, 262, 33, 299, 5};
  static constexpr int kNew = 20;
  std::unique_ptr<model::Transformer> model_;
};

TEST_F(TreeEngineTest, GreedyTreeBlocksCommitPlainGreedyAndKeepOnlyThePath) {
  RunTrees(model_.get(), /*expect_trees=*/true);
}

// Point-mass candidates (lookup's, OneHot q) in rejection mode: the target's own sample
// at each node (tree_verify.h), so the output is the target's alone with the same seed.
TEST_F(TreeEngineTest, SampledPointMassTreesCommitWhatTheTargetAloneSamples) {
  const std::vector<int32_t> alone =
      AloneRun(model_.get(), kPrompt, kNew + 8, proto::VERIFY_MODE_REJECTION);
  ASSERT_EQ(alone.size(), kPrompt.size() + kNew + 8);
  RunTrees(model_.get(), /*expect_trees=*/true, proto::VERIFY_MODE_REJECTION, alone);
}

TEST_F(TreeEngineTest, AChainOnlyTargetVerifiesTheFirstPath) {
  ChainOnlyModel chains(model_.get());
  RunTrees(&chains, /*expect_trees=*/false);
}

// A chain block (parents empty) of `tokens` at `start`.
proto::DraftBlock ChainBlock(const std::vector<int32_t>& tokens, uint64_t epoch, int start,
                             uint64_t sequence) {
  TreeBlock chain;
  chain.tokens = tokens;
  proto::DraftBlock block = Block(chain, epoch, start, sequence);
  block.clear_parents();
  return block;
}

// The draft worker drafts its next block past a tree along the tree's first path
// (draft_worker/draft_engine.h); the target keeps it only when the accepted path is
// that whole first path.
class TreePipelineTest : public TreeEngineTest {
 protected:
  void Start(TargetEngine& engine) {
    ASSERT_TRUE(engine.AddRequest(Assign(kPrompt, kNew)).ok());
    std::vector<TargetEvent> events;
    for (int i = 0; i < 10 && engine.HasWork(now_); ++i)
      ASSERT_TRUE(engine.Step(now_, &events).ok());
  }
  // One step; the result it reports to the coordinator.
  proto::VerifyResult StepResult(TargetEngine& engine) {
    std::vector<TargetEvent> events;
    EXPECT_TRUE(engine.Step(now_, &events).ok());
    proto::VerifyResult result;
    for (const TargetEvent& e : events) {
      if (e.to_coordinator) result = e.result;
    }
    return result;
  }
  void ExpectCacheHoldsAllBut(const TargetEngine& engine, const std::vector<int32_t>& committed,
                              int unfed) {
    const TargetRequest* request = engine.Find("r");
    ASSERT_NE(request, nullptr);
    auto reference = model_->NewCache();
    model::ForwardOutput out;
    const std::vector<int32_t> fed(committed.begin(), committed.end() - unfed);
    ASSERT_TRUE(model_->Forward({{reference.get(), fed, model::LogitsMode::kNone}}, &out).ok());
    ExpectSameCache(request->cache(), *reference);
  }
  TargetEngineOptions Options() const {
    TargetEngineOptions options;
    options.block_wait = absl::Hours(1);
    options.feed_wait = absl::ZeroDuration();
    return options;
  }
  const absl::Time now_ = absl::Now();
};

TEST_F(TreePipelineTest, ABlockQueuedBehindATreeIsUsedWhenTheWholeFirstPathIsAccepted) {
  const std::vector<int32_t> truth = GreedyExtend(*model_, kPrompt, 8);
  const int s = static_cast<int>(kPrompt.size());
  const int vocab = model_->config().vocab_size;
  auto wrong = [&](int32_t t) { return (t + 7) % vocab; };
  TargetEngine engine(model_.get(), Options());
  Start(engine);
  // First path truth[s..s+2] (nodes 0, 1, 2), then a wrong child of node 0 and a wrong
  // child of the root; behind it, the chain truth[s+3], truth[s+4].
  TreeBlock tree;
  tree.tokens = {truth[s], truth[s + 1], truth[s + 2], wrong(truth[s + 1]), wrong(truth[s])};
  tree.parents = {-1, 0, 1, 0, -1};
  ASSERT_EQ(engine.AddBlock(Block(tree, 0, s, 1), "d"), BlockAdmission::kQueued);
  ASSERT_EQ(engine.AddBlock(ChainBlock({truth[s + 3], truth[s + 4]}, 0, s + 3, 2), "d"),
            BlockAdmission::kQueued);
  const proto::VerifyResult first = StepResult(engine);
  EXPECT_EQ(std::vector<int32_t>(first.accepted_nodes().begin(), first.accepted_nodes().end()),
            (std::vector<int32_t>{0, 1, 2}));
  // No bonus: the queued block verifies that position; the epoch stays.
  EXPECT_EQ(std::vector<int32_t>(first.committed_tokens().begin(), first.committed_tokens().end()),
            std::vector<int32_t>(truth.begin() + s, truth.begin() + s + 3));
  EXPECT_EQ(first.epoch(), 0u);
  EXPECT_EQ(first.frontier(), static_cast<uint32_t>(s + 3));
  // The cache holds every committed token (p after them is pending).
  ExpectCacheHoldsAllBut(engine, std::vector<int32_t>(truth.begin(), truth.begin() + s + 3), 0);
  const proto::VerifyResult second = StepResult(engine);
  EXPECT_EQ(second.block_sequence(), 2u) << "the queued block was verified";
  EXPECT_EQ(second.accepted(), 2u);
  EXPECT_EQ(std::vector<int32_t>(second.committed_tokens().begin(),
                                 second.committed_tokens().end()),
            std::vector<int32_t>(truth.begin() + s + 3, truth.begin() + s + 6))
      << "plain greedy decoding, token for token (its bonus included)";
  ExpectCacheHoldsAllBut(engine, std::vector<int32_t>(truth.begin(), truth.begin() + s + 6), 1);
}

TEST_F(TreePipelineTest, ABlockQueuedBehindATreeIsStaleWhenAnotherPathIsAccepted) {
  const std::vector<int32_t> truth = GreedyExtend(*model_, kPrompt, 8);
  const int s = static_cast<int>(kPrompt.size());
  const int vocab = model_->config().vocab_size;
  auto wrong = [&](int32_t t) { return (t + 7) % vocab; };
  for (const bool first_path_rejected : {true, false}) {
    SCOPED_TRACE(first_path_rejected ? "the second branch is the truth"
                                     : "the first path is accepted in part");
    TargetEngine engine(model_.get(), Options());
    Start(engine);
    TreeBlock tree;
    std::vector<int32_t> want_nodes;
    if (first_path_rejected) {
      // First path truth[s], wrong (nodes 0, 1); the truth continues at node 2 (a child
      // of node 0) and node 3.
      tree.tokens = {truth[s], wrong(truth[s + 1]), truth[s + 1], truth[s + 2]};
      tree.parents = {-1, 0, 0, 2};
      want_nodes = {0, 2, 3};
    } else {
      // First path truth[s], wrong: the block behind it (at s + 2) is drafted past a
      // path the target does not accept.
      tree.tokens = {truth[s], wrong(truth[s + 1]), wrong(truth[s])};
      tree.parents = {-1, 0, -1};
      want_nodes = {0};
    }
    const int first_path = 2;
    ASSERT_EQ(engine.AddBlock(Block(tree, 0, s, 1), "d"), BlockAdmission::kQueued);
    ASSERT_EQ(engine.AddBlock(ChainBlock({truth[s + 2]}, 0, s + first_path, 2), "d"),
              BlockAdmission::kQueued);
    const proto::VerifyResult result = StepResult(engine);
    EXPECT_EQ(std::vector<int32_t>(result.accepted_nodes().begin(), result.accepted_nodes().end()),
              want_nodes);
    // The bonus (or the correction) is taken, in a new epoch: the block behind is dropped.
    const int committed = static_cast<int>(want_nodes.size()) + 1;
    EXPECT_EQ(std::vector<int32_t>(result.committed_tokens().begin(),
                                   result.committed_tokens().end()),
              std::vector<int32_t>(truth.begin() + s, truth.begin() + s + committed));
    EXPECT_EQ(result.epoch(), 1u);
    const TargetRequest* request = engine.Find("r");
    ASSERT_NE(request, nullptr);
    EXPECT_FALSE(request->HasBlockAt(s + first_path));
    EXPECT_EQ(engine.AddBlock(ChainBlock({truth[s + committed]}, 0, s + committed, 3), "d"),
              BlockAdmission::kStaleEpoch);
    ExpectCacheHoldsAllBut(engine,
                           std::vector<int32_t>(truth.begin(), truth.begin() + s + committed), 1);
  }
}

TEST_F(TreeEngineTest, TreesWithBadParentsAreMalformed) {
  TargetEngine engine(model_.get(), {});
  const std::vector<int32_t> prompt = {0, 72, 101};
  ASSERT_TRUE(engine.AddRequest(Assign(prompt, 8)).ok());
  TreeBlock bad;
  bad.tokens = {10, 11, 12};
  for (const std::vector<int32_t>& parents : std::vector<std::vector<int32_t>>{
           {-1, 0},         // one parent short
           {-1, 1, 0},      // a parent after its child
           {-1, 0, -2},     // no such node
           {-1, -1, 0}}) {  // node 0 after node 1 (not depth-first order)
    bad.parents = parents;
    EXPECT_EQ(engine.AddBlock(Block(bad, 0, 3, 1), "d"), BlockAdmission::kMalformed)
        << ::testing::PrintToString(parents);
  }
  bad.parents = {-1, 0, -1};
  EXPECT_EQ(engine.AddBlock(Block(bad, 0, 3, 1), "d"), BlockAdmission::kQueued);
  EXPECT_EQ(engine.counters().malformed_blocks, 4u);
}

}  // namespace
}  // namespace splitspec::target
