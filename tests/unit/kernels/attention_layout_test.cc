// The CUDA attention kernel's memory map (kernels/cuda/attention_layout.h), checked on
// the CPU: for the model shapes the project runs, every shared-memory index a block
// reads (the 16-byte vector tail included) and every KV cache, query and output
// element it touches lies inside its allocation, at every position count 1..700 and
// at every graph position bucket up to the kernel's limit.
#include "kernels/cuda/attention_layout.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::kernels {
namespace {

struct ModelShape {
  std::string name;
  int head_dim, n_heads, n_kv_heads, n_layers;
};

const std::vector<ModelShape>& Shapes() {
  static const std::vector<ModelShape> shapes = {
      {"SmolLM2-135M", 64, 9, 3, 30},
      {"Llama-3.2-1B", 64, 32, 8, 16},
      {"Llama-3-8B", 128, 32, 8, 32},
      {"tiny", 16, 4, 2, 2},  // tests/testing/tiny_model.h
  };
  return shapes;
}

// Rank r of a `ranks`-way head split (whole KV groups per rank, as tp_shard.h splits them).
AttentionShape RankShape(const ModelShape& m, int ranks, int r, int layer, int max_positions) {
  const int kv_per_rank = m.n_kv_heads / ranks;
  const int group = m.n_heads / m.n_kv_heads;
  AttentionShape s;
  s.kv_heads = kv_per_rank;
  s.kv_head_begin = r * kv_per_rank;
  s.q_heads = kv_per_rank * group;
  s.head_begin = s.kv_head_begin * group;
  s.group = group;
  s.head_dim = m.head_dim;
  s.layer = layer;
  s.max_positions = max_positions;
  return s;
}

// Every index a block (h, t) touches with n_pos positions, against allocations of
// `capacity` cache positions and `tokens` query rows; returns the first violation.
std::string CheckBlock(const ModelShape& m, const AttentionShape& s, int h, int64_t t,
                       int64_t tokens, int n_pos, int64_t capacity) {
  const AttentionSharedLayout layout = AttentionSharedLayoutFor(s.max_positions);
  if (AttentionScoresReadEnd(n_pos) > layout.score_floats) {
    return "scores read to " + std::to_string(AttentionScoresReadEnd(n_pos)) + " of " +
           std::to_string(layout.score_floats);
  }
  if (layout.scores + layout.score_floats * static_cast<int64_t>(sizeof(float)) >
      layout.total_bytes) {
    return "scores end past the allocation";
  }
  const int kv_head = AttentionKvHead(s, h);
  if (kv_head < 0 || kv_head >= s.kv_heads) return "kv head " + std::to_string(kv_head);
  // Offsets grow with the position and the element: the extremes bound every access.
  const int64_t cache_elements =
      static_cast<int64_t>(m.n_layers) * 2 * capacity * s.kv_heads * s.head_dim;
  const int64_t first_key = AttentionKeyOffset(s, capacity, kv_head, 0, 0);
  const int64_t last_value = AttentionValueOffset(s, capacity, kv_head, n_pos - 1, s.head_dim - 1);
  if (first_key < 0 || last_value >= cache_elements) {
    return "cache elements [" + std::to_string(first_key) + ", " + std::to_string(last_value) +
           "] of " + std::to_string(cache_elements);
  }
  // A key row never reaches into the value plane, nor another KV head's columns.
  const int64_t last_key = AttentionKeyOffset(s, capacity, kv_head, n_pos - 1, s.head_dim - 1);
  const int64_t plane_end = (2 * static_cast<int64_t>(s.layer) + 1) * capacity * s.kv_heads *
                            static_cast<int64_t>(s.head_dim);
  if (last_key >= plane_end) return "key past its plane";
  const int64_t q_elements = tokens * s.q_heads * static_cast<int64_t>(s.head_dim);
  const int64_t last_q = AttentionQueryOffset(s, t, h, s.head_dim - 1);
  if (AttentionQueryOffset(s, t, h, 0) < 0 || last_q >= q_elements) {
    return "query/output element " + std::to_string(last_q) + " of " + std::to_string(q_elements);
  }
  return "";
}

TEST(AttentionLayoutTest, TheSharedRegionsAreAlignedAndDisjoint) {
  for (int p : {1, 2, 3, 4, 5, 26, 599, 600, 601, 49151, 49152}) {
    const AttentionSharedLayout l = AttentionSharedLayoutFor(p);
    EXPECT_EQ(l.sum_scratch % static_cast<int64_t>(sizeof(double)), 0);
    EXPECT_GE(l.max_scratch, l.sum_scratch + kAttentionScratchSlots * 8);
    EXPECT_GE(l.scores, l.max_scratch + kAttentionScratchSlots * 4);
    EXPECT_EQ(l.scores % 16, 0) << "a 16-byte shared load needs a 16-byte aligned base";
    EXPECT_GE(l.score_floats, p);
    EXPECT_EQ(l.score_floats % kAttentionSharedVectorFloats, 0);
    EXPECT_EQ(l.total_bytes, l.scores + 4 * l.score_floats) << p;
  }
}

// The fault of the first GPU run: 26 positions (cuda_graph_test's third prompt) read
// scores 24..27 in one 16-byte load; an allocation of 26 floats ended inside it.
TEST(AttentionLayoutTest, TheVectorTailOfTheLastPositionFitsAtEveryRemainder) {
  for (int p = 1; p <= 64; ++p) {
    EXPECT_LE(AttentionScoresReadEnd(p), AttentionSharedLayoutFor(p).score_floats)
        << "max_positions " << p;
  }
  EXPECT_EQ(AttentionScoresReadEnd(26), 28);
  EXPECT_EQ(AttentionSharedLayoutFor(26).score_floats, 28);
}

TEST(AttentionLayoutTest, EveryBlockStaysInsideItsAllocationsForTheModelShapes) {
  // Positions 1..700 one by one, then the graph position buckets up to the kernel's limit.
  std::vector<int> max_positions;
  for (int p = 1; p <= 700; ++p) max_positions.push_back(p);
  for (int p : {1024, 2047, 2048, 4096, 8191, 8192, 16384, 32768, 49151, 49152}) {
    max_positions.push_back(p);
  }
  for (const ModelShape& m : Shapes()) {
    for (int ranks : {1, m.n_kv_heads}) {
      for (int r = 0; r < ranks; ++r) {
        for (int layer : {0, m.n_layers - 1}) {
          for (int p : max_positions) {
            const AttentionShape s = RankShape(m, ranks, r, layer, p);
            // A ragged batch: the launch's largest token, a short one and one in between;
            // caches whose capacity is exactly what they hold, and one with room to spare.
            const std::vector<int> n_pos_list = {p, 1, (p + 1) / 2};
            for (size_t t = 0; t < n_pos_list.size(); ++t) {
              for (int64_t capacity : {static_cast<int64_t>(n_pos_list[t]),
                                       RoundUpTo(n_pos_list[t], 64)}) {
                for (int h : {0, s.q_heads - 1}) {
                  const std::string error =
                      CheckBlock(m, s, h, static_cast<int64_t>(t),
                                 static_cast<int64_t>(n_pos_list.size()), n_pos_list[t], capacity);
                  ASSERT_EQ(error, "") << m.name << " rank " << r << "/" << ranks << " layer "
                                       << layer << " max_positions " << p << " token " << t
                                       << " head " << h;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(AttentionLayoutTest, TheLargestLaunchFitsTheOptInSharedMemoryOfAnH100) {
  // 49152 positions: 196,992 bytes; sm_90 allows a block 232,448 (227 KiB) after opting in.
  EXPECT_LE(AttentionSharedLayoutFor(49152).total_bytes, 232448);
}

}  // namespace
}  // namespace splitspec::kernels
