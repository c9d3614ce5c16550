#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

// A block of keys (transposed) and values (rows of v_stride) of fresh random halves,
// and queries rounded to half as the model rounds them.
struct RandomBlock {
  std::vector<uint16_t> kt;  // [head_dim][kKvBlockPositions]
  std::vector<uint16_t> v;   // [kKvBlockPositions][v_stride]
  std::vector<float> q;      // [count][head_dim]
};

RandomBlock MakeBlock(int head_dim, int64_t v_stride, int count, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.5f);
  RandomBlock b;
  b.kt.resize(static_cast<size_t>(head_dim) * kKvBlockPositions);
  b.v.resize(static_cast<size_t>(kKvBlockPositions) * v_stride);
  b.q.resize(static_cast<size_t>(count) * head_dim);
  for (auto& x : b.kt) x = FloatToFp16(dist(rng));
  for (auto& x : b.v) x = FloatToFp16(dist(rng));
  for (auto& x : b.q) x = RoundToHalf(dist(rng));
  return b;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every path the dispatch takes (AVX-512, AVX2 under SPLITSPEC_CPU_ISA=avx2, or the
// reference itself) gives the reference's bits, for ragged tiles and partial blocks.
TEST(AttendKvBlockTest, DispatchedPathEqualsReferenceBitwise) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed << " isa " << CpuIsaName());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> n_dist(1, kKvBlockPositions);
  for (int head_dim : {64, 128, 256, 48}) {
    const int64_t v_stride = 3 * head_dim + 16;  // the head's slice of a wider row
    for (int count : {1, 2, 3, 4, 5, 7, 9, 15, 16, 48}) {
      const RandomBlock b = MakeBlock(head_dim, v_stride, count, rng);
      std::vector<KvBlockQuery> queries(count);
      for (int i = 0; i < count; ++i) {
        // Full blocks, one position, and ragged ends, mixed within a tile.
        const int n = i % 3 == 0 ? kKvBlockPositions : (i % 3 == 1 ? 1 : n_dist(rng));
        queries[i] = {b.q.data() + i * head_dim, n};
      }
      const size_t floats = count * KvBlockPartialFloats(head_dim);
      std::vector<float> got(floats), want(floats);
      AttendKvBlock(queries.data(), count, b.kt.data(), b.v.data() + head_dim, v_stride, head_dim,
                    0.125f, got.data());
      AttendKvBlockReference(queries.data(), count, b.kt.data(), b.v.data() + head_dim, v_stride,
                             head_dim, 0.125f, want.data());
      ASSERT_TRUE(SameBits(got, want)) << "head_dim " << head_dim << " count " << count;
    }
  }
}

// The prefetch hint (the next block, whole or ragged) does not change a result: the
// dispatched path with it gives the reference's bits.
TEST(AttendKvBlockTest, PrefetchOfTheNextBlockLeavesResultsUnchanged) {
  std::mt19937 rng(5);
  for (int head_dim : {64, 128}) {
    const int64_t v_stride = 2 * head_dim;
    for (int count : {1, 3, 15}) {
      const RandomBlock b = MakeBlock(head_dim, v_stride, count, rng);
      const RandomBlock next = MakeBlock(head_dim, v_stride, 1, rng);
      std::vector<KvBlockQuery> queries(count);
      for (int i = 0; i < count; ++i) {
        queries[i] = {b.q.data() + i * head_dim, i % 2 == 0 ? kKvBlockPositions : 17 + i};
      }
      const size_t floats = count * KvBlockPartialFloats(head_dim);
      for (int next_rows : {kKvBlockPositions, 5}) {
        std::vector<float> got(floats), want(floats);
        AttendKvBlock(queries.data(), count, b.kt.data(), b.v.data(), v_stride, head_dim, 0.125f,
                      got.data(), KvBlockPrefetch{next.kt.data(), next.v.data(), next_rows});
        AttendKvBlockReference(queries.data(), count, b.kt.data(), b.v.data(), v_stride, head_dim,
                               0.125f, want.data());
        ASSERT_TRUE(SameBits(got, want))
            << "head_dim " << head_dim << " count " << count << " next rows " << next_rows;
      }
    }
  }
}

// Sliding windows that start inside the block (KvBlockQuery::first): every path gives the
// reference's bits, and the masked positions contribute nothing: the output equals that of
// the same query over the positions [first, n) alone (normalized: the partial's own max
// differs only through which positions exist, so compare a / l).
TEST(AttendKvBlockTest, WindowStartInsideTheBlock) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed << " isa " << CpuIsaName());
  std::mt19937 rng(seed);
  for (int head_dim : {64, 256, 48}) {
    const int64_t v_stride = head_dim;
    const int count = 7;
    const RandomBlock b = MakeBlock(head_dim, v_stride, count, rng);
    std::vector<KvBlockQuery> queries(count);
    for (int i = 0; i < count; ++i) {
      const int n = std::uniform_int_distribution<int>(2, kKvBlockPositions)(rng);
      const int first = i == 0 ? 0 : std::uniform_int_distribution<int>(1, n - 1)(rng);
      queries[i] = {b.q.data() + i * head_dim, n, first};
    }
    const int64_t stride = KvBlockPartialFloats(head_dim);
    std::vector<float> got(count * stride), want(count * stride);
    AttendKvBlock(queries.data(), count, b.kt.data(), b.v.data(), v_stride, head_dim, 0.125f,
                  got.data());
    AttendKvBlockReference(queries.data(), count, b.kt.data(), b.v.data(), v_stride, head_dim,
                           0.125f, want.data());
    ASSERT_TRUE(SameBits(got, want)) << "head_dim " << head_dim;
    for (int i = 0; i < count; ++i) {
      const int first = queries[i].first, n = queries[i].n;
      // Exact softmax over [first, n) of the half keys and values.
      std::vector<double> w(n, 0.0);
      double max = -1e300, sum = 0;
      for (int j = first; j < n; ++j) {
        double dot = 0;
        for (int d = 0; d < head_dim; ++d) {
          dot += queries[i].q[d] * Fp16ToFloat(b.kt[d * kKvBlockPositions + j]);
        }
        w[j] = dot * 0.125;
        max = std::max(max, w[j]);
      }
      for (int j = first; j < n; ++j) sum += (w[j] = std::exp(w[j] - max));
      const float* partial = want.data() + i * stride;
      for (int d = 0; d < head_dim; ++d) {
        double exact = 0;
        for (int j = first; j < n; ++j) exact += w[j] / sum * Fp16ToFloat(b.v[j * v_stride + d]);
        ASSERT_NEAR(partial[2 + d] / partial[1], exact, 1e-4 * (std::fabs(exact) + 1))
            << "query " << i << " d " << d;
      }
    }
  }
}

// A query's partial does not depend on the other queries of its tile.
TEST(AttendKvBlockTest, QueryResultIndependentOfItsTile) {
  std::mt19937 rng(7);
  const int head_dim = 64, count = 6;
  const RandomBlock b = MakeBlock(head_dim, head_dim, count, rng);
  std::vector<KvBlockQuery> queries;
  for (int i = 0; i < count; ++i) queries.push_back({b.q.data() + i * head_dim, 10 + 9 * i});
  const int64_t stride = KvBlockPartialFloats(head_dim);
  std::vector<float> together(count * stride);
  AttendKvBlock(queries.data(), count, b.kt.data(), b.v.data(), head_dim, head_dim, 0.125f,
                together.data());
  for (int i = 0; i < count; ++i) {
    std::vector<float> alone(stride);
    AttendKvBlock(&queries[i], 1, b.kt.data(), b.v.data(), head_dim, head_dim, 0.125f,
                  alone.data());
    EXPECT_EQ(std::memcmp(alone.data(), together.data() + i * stride, stride * sizeof(float)), 0)
        << "query " << i;
  }
}

// Every tile size and split of the AVX-512 path (4 queries or fewer: one tile; 5 to 16:
// one wide tile; more: wide tiles of near-equal sizes) with ragged ends and window starts
// mixed within a tile gives the reference's bits, at every head size it dispatches.
TEST(AttendKvBlockTest, EveryTileSizeWithRaggedQueriesEqualsReferenceBitwise) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed << " isa " << CpuIsaName());
  std::mt19937 rng(seed);
  for (int head_dim : {64, 128, 256}) {
    const int64_t v_stride = head_dim + 32;
    for (int count = 1; count <= 40; ++count) {
      const RandomBlock b = MakeBlock(head_dim, v_stride, count, rng);
      std::vector<KvBlockQuery> queries(count);
      for (int i = 0; i < count; ++i) {
        const int n = std::uniform_int_distribution<int>(1, kKvBlockPositions)(rng);
        const int first = i % 4 == 3 ? std::uniform_int_distribution<int>(0, n - 1)(rng) : 0;
        queries[i] = {b.q.data() + i * head_dim, i % 5 == 0 ? kKvBlockPositions : n,
                      i % 5 == 0 ? 0 : first};
      }
      const size_t floats = count * KvBlockPartialFloats(head_dim);
      std::vector<float> got(floats), want(floats);
      AttendKvBlock(queries.data(), count, b.kt.data(), b.v.data(), v_stride, head_dim, 0.125f,
                    got.data());
      AttendKvBlockReference(queries.data(), count, b.kt.data(), b.v.data(), v_stride, head_dim,
                             0.125f, want.data());
      ASSERT_TRUE(SameBits(got, want)) << "head_dim " << head_dim << " count " << count;
    }
  }
}

// Scores below the max by 84-93, across exp's underflow boundary (s_j - m < -87.68: 2^n
// leaves the normal range; the AVX-512 order gives subnormals down to n = -126, then 0):
// the vector exps give the scalar exp's bits there too, in the one-tile and the wide-tile
// paths. The max's value row is zero, so a = sum of those tiny e_j * v_j shows every bit.
TEST(AttendKvBlockTest, SoftmaxThroughTheUnderflowBoundaryEqualsReferenceBitwise) {
  const int head_dim = 64;
  std::mt19937 rng(13);
  for (float below : {84.0f, 86.0f, 87.0f, 88.5f}) {
    RandomBlock b = MakeBlock(head_dim, head_dim, 15, rng);
    // s_0 = 0 (the max), s_j = -(below + (j - 1) / 16) for j >= 1: exact in half precision.
    for (int d = 0; d < head_dim; ++d) {
      for (int j = 0; j < kKvBlockPositions; ++j) {
        const float key = d > 0 || j == 0 ? 0.0f : -(below + (j - 1) / 16.0f);
        b.kt[d * kKvBlockPositions + j] = FloatToFp16(key);
      }
      b.v[d] = FloatToFp16(0.0f);
    }
    for (int i = 0; i < 15; ++i) b.q[i * head_dim] = 1.0f;
    for (int count : {1, 3, 15}) {
      std::vector<KvBlockQuery> queries(count);
      for (int i = 0; i < count; ++i) queries[i] = {b.q.data() + i * head_dim, kKvBlockPositions};
      const size_t floats = count * KvBlockPartialFloats(head_dim);
      std::vector<float> got(floats), want(floats);
      AttendKvBlock(queries.data(), count, b.kt.data(), b.v.data(), head_dim, head_dim, 1.0f,
                    got.data());
      AttendKvBlockReference(queries.data(), count, b.kt.data(), b.v.data(), head_dim, head_dim,
                             1.0f, want.data());
      ASSERT_EQ(want[0], 0.0f);  // the max
      // The tiny products reach a while some e_j > 0; from 87.68 below, every e_j is 0.
      if (below < 87.0f) {
        ASSERT_NE(want[2], 0.0f) << "below " << below;
      } else if (below > 88.0f) {
        ASSERT_EQ(want[2], 0.0f) << "below " << below;
      }
      ASSERT_TRUE(SameBits(got, want)) << "below " << below << " count " << count;
    }
  }
}

// Partials merged over blocks give softmax attention over all positions, within the
// rounding of float sums and the exp approximation.
TEST(AttendKvBlockTest, MergedBlocksApproximateExactAttention) {
  std::mt19937 rng(11);
  const int head_dim = 64;
  for (int positions : {1, 63, 64, 65, 200, 4097}) {
    const int blocks = (positions + kKvBlockPositions - 1) / kKvBlockPositions;
    std::vector<RandomBlock> kv;
    for (int b = 0; b < blocks; ++b) kv.push_back(MakeBlock(head_dim, head_dim, 1, rng));
    const std::vector<float>& q = kv[0].q;
    const float scale = 0.125f;
    const int64_t stride = KvBlockPartialFloats(head_dim);
    std::vector<float> state(stride), partial(stride), out(head_dim);
    for (int b = 0; b < blocks; ++b) {
      const KvBlockQuery query{q.data(),
                               std::min(kKvBlockPositions, positions - b * kKvBlockPositions)};
      AttendKvBlock(&query, 1, kv[b].kt.data(), kv[b].v.data(), head_dim, head_dim, scale,
                    b == 0 ? state.data() : partial.data());
      if (b > 0) MergeKvBlockPartial(partial.data(), head_dim, state.data());
    }
    FinishKvBlockPartials(state.data(), head_dim, out.data());
    // Exact attention in double.
    std::vector<double> s(positions);
    double max_s = -INFINITY;
    for (int j = 0; j < positions; ++j) {
      const RandomBlock& blk = kv[j / kKvBlockPositions];
      const int i = j % kKvBlockPositions;
      double dot = 0;
      for (int d = 0; d < head_dim; ++d)
        dot += q[d] * Fp16ToFloat(blk.kt[d * kKvBlockPositions + i]);
      s[j] = dot * scale;
      max_s = std::max(max_s, s[j]);
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - max_s));
    for (int d = 0; d < head_dim; ++d) {
      double want = 0;
      for (int j = 0; j < positions; ++j) {
        want += s[j] / sum *
                Fp16ToFloat(kv[j / kKvBlockPositions].v[(j % kKvBlockPositions) * head_dim + d]);
      }
      ASSERT_NEAR(out[d], want, 2e-5 + 1e-5 * std::fabs(want))
          << "positions " << positions << " d " << d;
    }
  }
}

// The merge path (AVX2 on x86) equals the scalar definition of the merge bitwise.
TEST(MergeKvBlockPartialTest, MatchesTheDefinition) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int head_dim : {64, 128, 40}) {
    const int64_t stride = KvBlockPartialFloats(head_dim);
    std::vector<float> state(stride), partial(stride);
    for (auto& x : state) x = dist(rng);
    for (auto& x : partial) x = dist(rng);
    state[1] = std::fabs(state[1]);
    partial[1] = std::fabs(partial[1]);
    std::vector<float> want = state;
    const float m = std::max(want[0], partial[0]);
    const float x = ExpApprox<GgmlOrder::kAvx512>(want[0] - m);
    const float y = ExpApprox<GgmlOrder::kAvx512>(partial[0] - m);
    want[0] = m;
    want[1] = std::fma(want[1], x, partial[1] * y);
    for (int d = 0; d < head_dim; ++d) want[2 + d] = std::fma(want[2 + d], x, partial[2 + d] * y);
    MergeKvBlockPartial(partial.data(), head_dim, state.data());
    EXPECT_TRUE(SameBits(state, want)) << "head_dim " << head_dim;
  }
}

}  // namespace
}  // namespace splitspec::kernels
