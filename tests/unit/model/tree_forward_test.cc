// Tree forward (SequenceInput::tree_parents): every node's logits are bitwise those of
// the chain forward along its path, on tiny random models (Llama F32 / Q4_1, heads of 64
// for the vector attention paths, Gemma 3 with sliding windows) and on SmolLM2-135M
// when it is installed; KvCache::KeepPath leaves the cache a chain of the accepted path
// would have built; bad parent lists and other backends are refused by name.

#include <algorithm>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "tests/testing/gloo_group.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;
using ::testing::HasSubstr;

// --- tree shapes (parents before children) ---

std::vector<int32_t> ChainParents(int n) {
  std::vector<int32_t> parents(n);
  for (int i = 0; i < n; ++i) parents[i] = i - 1;
  return parents;
}

std::vector<int32_t> StarParents(int n) {
  std::vector<int32_t> parents(n, 0);
  parents[0] = -1;
  return parents;
}

// A full trie of `branching` children per node to `depth`, in depth-first order (how
// drafters send trees).
std::vector<int32_t> TrieParents(int branching, int depth) {
  std::vector<int32_t> parents;
  auto add = [&](auto&& self, int parent, int level) -> void {
    const int node = static_cast<int>(parents.size());
    parents.push_back(parent);
    if (level == depth) return;
    for (int c = 0; c < branching; ++c) self(self, node, level + 1);
  };
  add(add, -1, 0);
  return parents;
}

// Breadth-first (heap) order: siblings first, so a node's ancestors are not the slots
// just before it.
std::vector<int32_t> HeapParents(int n) {
  std::vector<int32_t> parents(n);
  for (int i = 0; i < n; ++i) parents[i] = i == 0 ? -1 : (i - 1) / 2;
  return parents;
}

// Random parents, mostly recent nodes (deep and bushy at once).
std::vector<int32_t> RaggedParents(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> parents(n, -1);
  for (int i = 1; i < n; ++i) {
    const int lowest = rng() % 3 == 0 ? 0 : std::max(0, i - 3);
    parents[i] = lowest + static_cast<int>(rng() % (i - lowest));
  }
  return parents;
}

struct TreeShape {
  std::string name;
  std::vector<int32_t> parents;
};

std::vector<TreeShape> Shapes() {
  return {{"chain 9", ChainParents(9)},        {"star 12", StarParents(12)},
          {"trie 2x2x2", TrieParents(2, 3)},   {"heap 15", HeapParents(15)},
          {"ragged 20", RaggedParents(20, 7)}, {"single root", ChainParents(1)}};
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

// The nodes root..i.
std::vector<int32_t> PathTo(const std::vector<int32_t>& parents, int i) {
  std::vector<int32_t> path;
  for (int j = i; j >= 0; j = parents[j]) path.push_back(j);
  std::reverse(path.begin(), path.end());
  return path;
}

std::unique_ptr<Transformer> LoadTiny(const TinyModelOptions& options, int threads = 2) {
  auto file = GgufFile::FromBuffer(MakeTinyModel(options).Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto model = Transformer::FromFile(std::move(*file), {.threads = threads});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// A cache holding `context` (empty: an empty cache).
std::unique_ptr<KvCache> ContextCache(Transformer& model, const std::vector<int32_t>& context) {
  std::unique_ptr<KvCache> cache = model.NewCache(512);
  if (!context.empty()) {
    ForwardOutput out;
    const absl::Status s = model.Forward({{cache.get(), context, LogitsMode::kNone}}, &out);
    EXPECT_TRUE(s.ok()) << s;
  }
  return cache;
}

bool BitwiseEqual(const float* a, const float* b, int n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// Runs the tree over a copy of `context_cache` and checks every node's row against the
// chain forward of its path over another copy. Returns the tree's output.
ForwardOutput ExpectTreeMatchesChains(Transformer& model, const KvCache& context_cache,
                                      const std::vector<int32_t>& tokens,
                                      const std::vector<int32_t>& parents,
                                      const std::string& what) {
  KvCache tree_cache = context_cache;
  ForwardOutput tree;
  const absl::Status s = model.Forward({{&tree_cache, tokens, LogitsMode::kAll, parents}}, &tree);
  EXPECT_TRUE(s.ok()) << what << ": " << s;
  if (!s.ok()) return tree;
  EXPECT_EQ(tree.num_rows[0], static_cast<int>(tokens.size())) << what;
  EXPECT_EQ(tree_cache.length(), context_cache.length() + static_cast<int>(tokens.size())) << what;
  std::vector<bool> has_child(tokens.size(), false);
  for (size_t i = 1; i < parents.size(); ++i) has_child[parents[i]] = true;
  // One chain per leaf checks every node on its path.
  for (size_t leaf = 0; leaf < tokens.size(); ++leaf) {
    if (has_child[leaf]) continue;
    const std::vector<int32_t> path = PathTo(parents, static_cast<int>(leaf));
    std::vector<int32_t> chain_tokens;
    for (int32_t node : path) chain_tokens.push_back(tokens[node]);
    KvCache chain_cache = context_cache;
    ForwardOutput chain;
    const absl::Status c = model.Forward({{&chain_cache, chain_tokens, LogitsMode::kAll}}, &chain);
    EXPECT_TRUE(c.ok()) << what << ": " << c;
    if (!c.ok()) return tree;
    for (size_t k = 0; k < path.size(); ++k) {
      EXPECT_TRUE(
          BitwiseEqual(tree.Row(0, path[k]), chain.Row(0, static_cast<int>(k)), tree.vocab_size))
          << what << ": node " << path[k] << " (depth " << k << ", context "
          << context_cache.length() << ") differs from its chain";
    }
  }
  return tree;
}

struct ModelCase {
  std::string name;
  TinyModelOptions options;
};
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

TinyModelOptions Llama(GgmlType type, int n_embd, int n_heads, int n_kv_heads) {
  TinyModelOptions o;
  o.weight_type = type;
  o.embedding_type = type;
  o.n_embd = n_embd;
  o.n_ff = 2 * n_embd;
  o.n_heads = n_heads;
  o.n_kv_heads = n_kv_heads;
  return o;
}

// Gemma 3's shape (TinyGemma3Options): five sliding layers and one global, heads of 64, a
// window that starts inside the attention blocks and moves through the tree.
TinyModelOptions Gemma3(int window) { return TinyGemma3Options(GgmlType::kF32, window); }

class TreeForwardTest : public ::testing::TestWithParam<ModelCase> {};

// Contexts: none (the root at position 0), inside the first block, trees crossing the
// 64-position block boundary, a context ending on it, and several committed blocks.
TEST_P(TreeForwardTest, EveryNodeEqualsTheChainAlongItsPath) {
  std::unique_ptr<Transformer> model = LoadTiny(GetParam().options);
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  for (int context_length : {0, 5, 61, 64, 130}) {
    const std::vector<int32_t> context = RandomTokens(context_length, vocab, 11 + context_length);
    std::unique_ptr<KvCache> context_cache = ContextCache(*model, context);
    uint32_t seed = 100;
    for (const TreeShape& shape : Shapes()) {
      const std::vector<int32_t> tokens =
          RandomTokens(static_cast<int>(shape.parents.size()), vocab, seed++);
      ExpectTreeMatchesChains(*model, *context_cache, tokens, shape.parents,
                              absl::StrCat(shape.name, " after ", context_length));
    }
  }
}

// A chain deeper than a block: the path crosses two block boundaries, beside a branch.
TEST_P(TreeForwardTest, DeepTreeCrossingTwoBlocks) {
  std::unique_ptr<Transformer> model = LoadTiny(GetParam().options);
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  std::vector<int32_t> parents = ChainParents(70);
  for (int i = 0; i < 6; ++i) parents.push_back(i * 10);  // side branches off the trunk
  parents.push_back(static_cast<int32_t>(parents.size()) - 1);
  std::unique_ptr<KvCache> context_cache = ContextCache(*model, RandomTokens(61, vocab, 3));
  ExpectTreeMatchesChains(*model, *context_cache,
                          RandomTokens(static_cast<int>(parents.size()), vocab, 4), parents,
                          "deep tree");
}

INSTANTIATE_TEST_SUITE_P(
    Models, TreeForwardTest,
    ::testing::Values(ModelCase{"LlamaF32", Llama(GgmlType::kF32, 64, 4, 2)},
                      ModelCase{"LlamaQ4_1Heads64", Llama(GgmlType::kQ4_1, 128, 2, 1)},
                      ModelCase{"Gemma3Window8", Gemma3(8)},
                      ModelCase{"Gemma3Window40", Gemma3(40)}),
    [](const ::testing::TestParamInfo<ModelCase>& info) { return info.param.name; });

// A tree beside chains in one call, and on one thread against three: the same bits.
TEST(TreeForwardBatchTest, TreeInABatchAndThreadCountChangeNothing) {
  const TinyModelOptions options = Llama(GgmlType::kQ4_1, 128, 2, 1);
  std::unique_ptr<Transformer> model = LoadTiny(options, 2);
  std::unique_ptr<Transformer> one_thread = LoadTiny(options, 1);
  std::unique_ptr<Transformer> three_threads = LoadTiny(options, 3);
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  const std::vector<int32_t> parents = TrieParents(3, 2);
  const std::vector<int32_t> tokens = RandomTokens(static_cast<int>(parents.size()), vocab, 5);
  const std::vector<int32_t> context = RandomTokens(70, vocab, 6);
  const std::vector<int32_t> other = RandomTokens(20, vocab, 8);
  std::unique_ptr<KvCache> context_cache = ContextCache(*model, context);
  const ForwardOutput alone =
      ExpectTreeMatchesChains(*model, *context_cache, tokens, parents, "alone");
  ASSERT_EQ(alone.num_rows.size(), 1u);

  KvCache tree_cache = *context_cache;
  std::unique_ptr<KvCache> other_cache = model->NewCache(512);
  ForwardOutput batched;
  ASSERT_TRUE(model
                  ->Forward({{other_cache.get(), other, LogitsMode::kAll},
                             {&tree_cache, tokens, LogitsMode::kAll, parents}},
                            &batched)
                  .ok());
  ASSERT_EQ(batched.num_rows, (std::vector<int>{20, static_cast<int>(tokens.size())}));
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_TRUE(BitwiseEqual(batched.Row(1, i), alone.Row(0, i), alone.vocab_size)) << i;
  }
  KvCache other_alone(*model->NewCache(512));
  ForwardOutput out;
  ASSERT_TRUE(model->Forward({{&other_alone, other, LogitsMode::kAll}}, &out).ok());
  for (int j = 0; j < 20; ++j) {
    EXPECT_TRUE(BitwiseEqual(batched.Row(0, j), out.Row(0, j), out.vocab_size)) << j;
  }

  for (Transformer* m : {one_thread.get(), three_threads.get()}) {
    std::unique_ptr<KvCache> cache = ContextCache(*m, context);
    ASSERT_TRUE(m->Forward({{cache.get(), tokens, LogitsMode::kAll, parents}}, &out).ok());
    EXPECT_EQ(out.logits, alone.logits) << m->num_threads() << " threads";
  }
  // kLast: the last node's row.
  KvCache last_cache = *context_cache;
  ASSERT_TRUE(model->Forward({{&last_cache, tokens, LogitsMode::kLast, parents}}, &out).ok());
  ASSERT_EQ(out.num_rows[0], 1);
  EXPECT_TRUE(BitwiseEqual(out.Row(0, 0), alone.Row(0, static_cast<int>(tokens.size()) - 1),
                           out.vocab_size));
}

// --- KeepPath ---

// Every stored row of the first `length` positions, bitwise.
void ExpectSameRows(const KvCache& a, const KvCache& b, const std::string& what) {
  ASSERT_EQ(a.length(), b.length()) << what;
  for (int l = 0; l < a.n_layers(); ++l) {
    for (int p = 0; p < a.length(); ++p) {
      for (int c = 0; c < a.kv_dim(); ++c) {
        ASSERT_EQ(a.KeyAt(l, p, c), b.KeyAt(l, p, c)) << what << ": layer " << l << " pos " << p;
        ASSERT_EQ(a.ValueAt(l, p, c), b.ValueAt(l, p, c))
            << what << ": layer " << l << " pos " << p;
      }
    }
  }
}

TEST(KeepPathTest, KeptPathEqualsTheCommittedChainAndDecodesAlike) {
  std::unique_ptr<Transformer> model = LoadTiny(Llama(GgmlType::kQ4_1, 128, 2, 1));
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  const std::vector<int32_t> parents = TrieParents(2, 3);  // 15 nodes
  const std::vector<int32_t> tokens = RandomTokens(15, vocab, 21);
  const std::vector<int32_t> next = {static_cast<int32_t>(vocab - 1)};
  for (int context_length : {0, 62}) {
    const std::vector<int32_t> context = RandomTokens(context_length, vocab, 22);
    // The first branch (no row moves), a later branch (moves across the block boundary
    // at 64 for context 62), the root alone, and the last leaf.
    for (const std::vector<int32_t>& kept : std::vector<std::vector<int32_t>>{
             PathTo(parents, 3), PathTo(parents, 12), {0}, PathTo(parents, 14)}) {
      const std::string what =
          absl::StrCat("context ", context_length, ", path to node ", kept.back());
      std::unique_ptr<KvCache> cache = ContextCache(*model, context);
      ForwardOutput out;
      ASSERT_TRUE(model->Forward({{cache.get(), tokens, LogitsMode::kAll, parents}}, &out).ok());
      ASSERT_TRUE(cache->KeepPath(context_length, kept).ok()) << what;
      std::vector<int32_t> committed = context;
      for (int32_t node : kept) committed.push_back(tokens[node]);
      std::unique_ptr<KvCache> reference = ContextCache(*model, committed);
      ExpectSameRows(*cache, *reference, what);
      ForwardOutput a, b;
      ASSERT_TRUE(model->Forward({{cache.get(), next, LogitsMode::kLast}}, &a).ok());
      ASSERT_TRUE(model->Forward({{reference.get(), next, LogitsMode::kLast}}, &b).ok());
      EXPECT_EQ(a.logits, b.logits) << what;
    }
  }
}

TEST(KeepPathTest, EmptyPathTruncatesAndBadPathsAreRefused) {
  KvCache cache(2, 8, 256);
  ASSERT_TRUE(cache.Reserve(20).ok());
  std::vector<float> key(8), value(8);
  for (int p = 0; p < 20; ++p) {
    for (int c = 0; c < 8; ++c) {
      key[c] = static_cast<float>(p * 8 + c);
      value[c] = -key[c];
    }
    for (int l = 0; l < 2; ++l) cache.WriteRow(l, p, key.data(), value.data());
  }
  cache.Commit(20);
  struct Bad {
    int base;
    std::vector<int32_t> nodes;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{{-1, {0}, "base -1 outside [0, 20]"},
                                         {21, {0}, "base 21 outside [0, 20]"},
                                         {10, {0, 2, 2}, "nodes[2] = 2 not in [3, 10)"},
                                         {10, {-1}, "nodes[0] = -1 not in [0, 10)"},
                                         {10, {0, 10}, "nodes[1] = 10 not in [1, 10)"}}) {
    const absl::Status s = cache.KeepPath(bad.base, bad.nodes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.message;
    EXPECT_THAT(s.message(), HasSubstr(bad.message));
    EXPECT_EQ(cache.length(), 20);
  }
  ASSERT_TRUE(cache.KeepPath(10, std::vector<int32_t>{0, 3, 9}).ok());
  EXPECT_EQ(cache.length(), 13);
  EXPECT_EQ(cache.KeyAt(1, 11, 2), 13 * 8 + 2);
  EXPECT_EQ(cache.ValueAt(0, 12, 5), -(19 * 8 + 5));
  EXPECT_EQ(cache.KeyAt(0, 10, 0), 80);  // unmoved
  ASSERT_TRUE(cache.KeepPath(5, {}).ok());
  EXPECT_EQ(cache.length(), 5);
}

// --- refusals ---

TEST(TreeForwardRefusalTest, BadParentListsAreRefusedByMessage) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{});
  ASSERT_NE(model, nullptr);
  std::unique_ptr<KvCache> other = model->NewCache();
  std::unique_ptr<KvCache> cache = ContextCache(*model, {5, 6, 7});
  const std::vector<int32_t> tokens = {10, 11, 12, 13};
  const std::vector<int32_t> chain = {20};
  struct Bad {
    std::vector<int32_t> parents;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {{-1, 0, 1}, "sequence 1: 3 tree parents for 4 tokens"},
           {{0, 0, 1, 2}, "sequence 1: tree_parents[0] = 0, the root's parent must be -1"},
           {{-1, 0, 2, 1}, "sequence 1: tree_parents[2] = 2 outside [0, 2)"},
           {{-1, 0, 1, 7}, "sequence 1: tree_parents[3] = 7 outside [0, 3)"},
           {{-1, -1, 0, 0}, "sequence 1: tree_parents[1] = -1 outside [0, 1)"}}) {
    ForwardOutput out;
    const absl::Status s = model->Forward({{other.get(), chain, LogitsMode::kLast},
                                           {cache.get(), tokens, LogitsMode::kAll, bad.parents}},
                                          &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.message;
    EXPECT_THAT(s.message(), HasSubstr(bad.message));
    EXPECT_EQ(cache->length(), 3);
    EXPECT_EQ(other->length(), 0);
  }
}

TEST(TreeForwardRefusalTest, TensorParallelGroupRefusesTreesByName) {
  const std::vector<uint8_t> bytes = MakeTinyModel(TinyModelOptions{}).Serialize();
  const std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads({.size = 2}, [&](net::Communicator& comm) -> absl::Status {
        auto file = GgufFile::FromBuffer(bytes);
        if (!file.ok()) return file.status();
        auto model = Transformer::FromFile(std::move(*file), &comm, {.threads = 1});
        if (!model.ok()) return model.status();
        std::unique_ptr<KvCache> cache = (*model)->NewCache();
        const std::vector<int32_t> tokens = {1, 2, 3};
        const std::vector<int32_t> parents = {-1, 0, 0};
        ForwardOutput out;
        const absl::Status refused =
            (*model)->Forward({{cache.get(), tokens, LogitsMode::kAll, parents}}, &out);
        // Both ranks stay until the other is connected (a rank that left at once could
        // close the other's rendezvous).
        float one = 1.f;
        if (absl::Status s = comm.AllReduceSum(&one, 1); !s.ok()) return s;
        return refused;
      });
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_THAT(s.message(), HasSubstr("tree drafts"));
    EXPECT_THAT(s.message(), HasSubstr("tensor-parallel group (2 ranks)"));
  }
}

// --- the real model ---

TEST(TreeForwardRealModelTest, SmolLM2NodesEqualTheirChains) {
  const std::string path =
      std::string(SPLITSPEC_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto model = Transformer::Load(path, {.threads = 2});
  if (!model.ok() && absl::IsNotFound(model.status())) {
    GTEST_SKIP() << "model not found: " << path << " (" << model.status() << ")";
  }
  ASSERT_TRUE(model.ok()) << model.status();
  const int vocab = (*model)->config().vocab_size;
  // 60 committed tokens: the trees cross the block boundary at 64.
  std::unique_ptr<KvCache> context_cache = ContextCache(**model, RandomTokens(60, vocab, 31));
  for (const TreeShape& shape :
       {TreeShape{"trie 2x2x2", TrieParents(2, 3)}, TreeShape{"heap 15", HeapParents(15)},
        TreeShape{"ragged 12", RaggedParents(12, 9)}}) {
    ExpectTreeMatchesChains(**model, *context_cache,
                            RandomTokens(static_cast<int>(shape.parents.size()), vocab, 32),
                            shape.parents, shape.name);
  }
}

}  // namespace
}  // namespace splitspec::model
