#include "kernels/cpu/attention_q8.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

// ggml's quantize_row_q8_0_ref, restated value by value: d = amax / 127 (stored as
// half), id = 1 / d (from the float d, not the half), q = roundf(x * id).
TEST(QuantizeRowQ8_0Test, FollowsGgmlsReferenceRule) {
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[i] = 0.1f * static_cast<float>(i - 16);  // amax 1.6 at i = 0
  x[5] = 0.0f;
  for (int i = 32; i < 64; ++i) x[i] = 0.0f;  // an all-zero block: d = 0, q = 0
  x[40] = -3.0f;                               // ... but for one value
  int8_t q[64];
  uint16_t d[2];
  QuantizeRowQ8_0(x.data(), 64, q, d);
  const float d0 = 1.6f / 127.0f;
  EXPECT_EQ(d[0], FloatToFp16(d0));
  EXPECT_EQ(q[0], -127);
  EXPECT_EQ(q[5], 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[i], static_cast<int8_t>(std::roundf(x[i] * (1.0f / d0)))) << i;
  EXPECT_EQ(d[1], FloatToFp16(3.0f / 127.0f));
  EXPECT_EQ(q[40], -127);
  EXPECT_EQ(q[41], 0);
  // Half away from zero (roundf), not to even: 2.5 -> 3 and -2.5 -> -3 with d = 1.
  std::vector<float> halves(32, 0.0f);
  halves[0] = 127.0f;  // d = 1, id = 1
  halves[1] = 2.5f;
  halves[2] = -2.5f;
  halves[3] = 0.5f;
  QuantizeRowQ8_0(halves.data(), 32, q, d);
  EXPECT_EQ(Fp16ToFloat(d[0]), 1.0f);
  EXPECT_EQ(q[1], 3);
  EXPECT_EQ(q[2], -3);
  EXPECT_EQ(q[3], 1);
  // All zero: scale 0, quants 0 (no division by zero).
  std::vector<float> zeros(32, 0.0f);
  QuantizeRowQ8_0(zeros.data(), 32, q, d);
  EXPECT_EQ(d[0], 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q[i], 0);
}

// One block of one head in attention_q8.h's layout, from random float rows quantized
// by QuantizeRowQ8_0, values rows v_stride apart (the head's slice of a wider row).
struct Q8Block {
  std::vector<int8_t> kq;   // [head_dim / 4][64][4]
  std::vector<uint16_t> kd; // [head_dim / 32][64]
  std::vector<int8_t> vq;   // [64][v_stride]
  std::vector<uint16_t> vd; // [64][v_stride / 32]
  std::vector<float> q;     // [count][head_dim]
  int64_t v_stride;
  KvBlockQ8Rows rows() const {
    return {kq.data(), kd.data(), vq.data(), vd.data(), v_stride, v_stride / kQ8BlockValues};
  }
};

Q8Block MakeBlock(int head_dim, int64_t v_stride, int count, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.5f);
  Q8Block b;
  b.v_stride = v_stride;
  b.kq.resize(static_cast<size_t>(head_dim) * kKvBlockPositions);
  b.kd.resize(static_cast<size_t>(head_dim / kQ8BlockValues) * kKvBlockPositions);
  b.vq.resize(static_cast<size_t>(kKvBlockPositions) * v_stride);
  b.vd.resize(static_cast<size_t>(kKvBlockPositions) * (v_stride / kQ8BlockValues));
  std::vector<float> row(head_dim > v_stride ? head_dim : v_stride);
  std::vector<int8_t> quants(row.size());
  std::vector<uint16_t> scales(row.size() / kQ8BlockValues);
  for (int j = 0; j < kKvBlockPositions; ++j) {
    for (int d = 0; d < head_dim; ++d) row[d] = dist(rng);
    QuantizeRowQ8_0(row.data(), head_dim, quants.data(), scales.data());
    for (int d = 0; d < head_dim; ++d) b.kq[(d / 4) * 256 + j * 4 + d % 4] = quants[d];
    for (int s = 0; s < head_dim / kQ8BlockValues; ++s) b.kd[s * kKvBlockPositions + j] = scales[s];
    for (int d = 0; d < v_stride; ++d) row[d] = dist(rng);
    QuantizeRowQ8_0(row.data(), static_cast<int>(v_stride), &b.vq[j * v_stride],
                    &b.vd[j * (v_stride / kQ8BlockValues)]);
  }
  b.q.resize(static_cast<size_t>(count) * head_dim);
  for (auto& x : b.q) x = RoundToHalf(dist(rng));
  return b;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every path the dispatch takes (AVX-512 VNNI, AVX2 under SPLITSPEC_CPU_ISA=avx2, or
// the reference) gives the reference's bits, for ragged tiles, partial blocks and
// windows starting inside the block.
TEST(AttendKvBlockQ8Test, DispatchedPathEqualsReferenceBitwise) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed << " isa " << CpuIsaName());
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> n_dist(1, kKvBlockPositions);
  for (int head_dim : {32, 64, 96, 128, 256}) {
    const int64_t v_stride = 2 * head_dim + 64;
    for (int count : {1, 2, 3, 5, 9, 16, 48}) {
      const Q8Block b = MakeBlock(head_dim, v_stride, count, rng);
      std::vector<KvBlockQueryQ8> queries(count);
      std::vector<int8_t> qq(count * head_dim);
      std::vector<float> dq(count * head_dim / kQ8BlockValues);
      for (int i = 0; i < count; ++i) {
        const int n = i % 3 == 0 ? kKvBlockPositions : (i % 3 == 1 ? 1 : n_dist(rng));
        const int first = i % 4 == 3 ? (n - 1) / 2 : 0;
        int8_t* qqi = &qq[i * head_dim];
        float* dqi = &dq[i * head_dim / kQ8BlockValues];
        QuantizeQueryQ8_0(b.q.data() + i * head_dim, head_dim, qqi, dqi);
        queries[i] = {qqi, dqi, n, first};
      }
      const size_t floats = count * KvBlockPartialFloats(head_dim);
      std::vector<float> got(floats), want(floats);
      AttendKvBlockQ8(queries.data(), count, b.rows(), head_dim, 0.125f, got.data());
      AttendKvBlockQ8Reference(queries.data(), count, b.rows(), head_dim, 0.125f, want.data());
      ASSERT_TRUE(SameBits(got, want)) << "head_dim " << head_dim << " count " << count;
    }
  }
}

// The reference computes attention over the dequantized rows with the quantized query:
// for one full block, the finished output is softmax(s) . v within float rounding of a
// double-precision evaluation of the same quantized values.
TEST(AttendKvBlockQ8Test, ReferenceIsAttentionOverTheQuantizedValues) {
  std::mt19937 rng(7);
  const int head_dim = 64;
  const Q8Block b = MakeBlock(head_dim, head_dim, 1, rng);
  int8_t qq[64];
  uint16_t dq[2];
  QuantizeRowQ8_0(b.q.data(), head_dim, qq, dq);
  int8_t query_quants[64];
  float query_scales[2];
  QuantizeQueryQ8_0(b.q.data(), head_dim, query_quants, query_scales);
  for (int d = 0; d < head_dim; ++d) ASSERT_EQ(query_quants[d], qq[d]);
  ASSERT_EQ(query_scales[1], Fp16ToFloat(dq[1]));
  KvBlockQueryQ8 query{query_quants, query_scales, kKvBlockPositions, 0};
  std::vector<float> partial(KvBlockPartialFloats(head_dim)), out(head_dim);
  AttendKvBlockQ8Reference(&query, 1, b.rows(), head_dim, 0.125f, partial.data());
  FinishKvBlockPartials(partial.data(), head_dim, out.data());
  std::vector<double> s(kKvBlockPositions);
  double m = -INFINITY;
  for (int j = 0; j < kKvBlockPositions; ++j) {
    double dot = 0;
    for (int d = 0; d < head_dim; ++d) {
      dot += Fp16ToFloat(dq[d / 32]) * qq[d] * Fp16ToFloat(b.kd[(d / 32) * 64 + j]) *
             b.kq[(d / 4) * 256 + j * 4 + d % 4];
    }
    s[j] = dot * 0.125;
    m = std::max(m, s[j]);
  }
  double l = 0;
  for (auto& x : s) l += (x = std::exp(x - m));
  for (int d = 0; d < head_dim; ++d) {
    double a = 0;
    for (int j = 0; j < kKvBlockPositions; ++j) {
      a += s[j] * Fp16ToFloat(b.vd[j * 2 + d / 32]) * b.vq[j * head_dim + d];
    }
    EXPECT_NEAR(out[d], a / l, 1e-4 * (1 + std::fabs(a / l))) << d;
  }
}

}  // namespace
}  // namespace splitspec::kernels
