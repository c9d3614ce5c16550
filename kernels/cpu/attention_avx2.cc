// AVX2 path of the block attention order (attention.h): 8 positions per vector for the
// score chains (the keys are stored transposed), 8 output elements per vector for the
// value chains; the same float operations as the reference, so the same bits. Also the
// merge of partials, 8 elements per vector, for every x86 path.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/exp_approx.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kVectors = kKvBlockPositions / 8;  // 8 vectors of 8 positions
constexpr int kDimTile = 64;                     // output elements per pass of the value chains

// The 16-lane sum of the e vectors (attention.h): lanes 0-7 are the vectors of even
// index (positions 16c .. 16c + 7), lanes 8-15 those of odd index; then the folds.
inline float SixteenLaneSum(const __m256 (&e)[kVectors]) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int c = 0; c < kVectors; c += 2) {
    lo = _mm256_add_ps(lo, e[c]);
    hi = _mm256_add_ps(hi, e[c + 1]);
  }
  const __m256 x8 = _mm256_add_ps(hi, lo);                                          // h = 8
  __m128 u = _mm_add_ps(_mm256_extractf128_ps(x8, 1), _mm256_castps256_ps128(x8));  // h = 4
  u = _mm_add_ps(u, _mm_movehl_ps(u, u));                                           // h = 2
  u = _mm_add_ss(u, _mm_movehdup_ps(u));                                            // h = 1
  return _mm_cvtss_f32(u);
}

inline __m256 LoadHalves8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void AttendOne(const KvBlockQuery& query, const uint16_t* kt, const uint16_t* v, int64_t v_stride,
               int head_dim, float scale, float* partial) {
  const int n = query.n;
  const int used = (n + 7) / 8;  // vectors holding attended positions
  __m256 s[kVectors];
  for (int c = 0; c < kVectors; ++c) s[c] = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; ++d) {
    const __m256 qd = _mm256_broadcast_ss(query.q + d);
    const uint16_t* row = kt + d * kKvBlockPositions;
    for (int c = 0; c < kVectors; ++c) {
      if (c < used) s[c] = _mm256_fmadd_ps(qd, LoadHalves8(row + 8 * c), s[c]);
    }
  }
  const __m256 index = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 valid[kVectors];
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (int c = 0; c < kVectors; ++c) {
    const __m256 position = _mm256_add_ps(index, _mm256_set1_ps(8.0f * c));
    valid[c] = _mm256_and_ps(
        _mm256_cmp_ps(position, _mm256_set1_ps(static_cast<float>(n)), _CMP_LT_OQ),
        _mm256_cmp_ps(position, _mm256_set1_ps(static_cast<float>(query.first)), _CMP_GE_OQ));
    s[c] = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_mul_ps(s[c], _mm256_set1_ps(scale)),
                            valid[c]);
    vmax = _mm256_max_ps(vmax, s[c]);
  }
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float m = _mm_cvtss_f32(m4);
  alignas(32) float e[kKvBlockPositions];
  for (int c = 0; c < kVectors; ++c) {
    s[c] = _mm256_and_ps(ExpApprox8<GgmlOrder::kAvx512>(_mm256_sub_ps(s[c], _mm256_set1_ps(m))),
                         valid[c]);
    _mm256_store_ps(e + 8 * c, s[c]);
  }
  partial[0] = m;
  partial[1] = SixteenLaneSum(s);
  for (int d0 = 0; d0 < head_dim; d0 += kDimTile) {
    __m256 a[kDimTile / 8];
    for (auto& x : a) x = _mm256_setzero_ps();
    for (int j = 0; j < n; ++j) {
      const __m256 ej = _mm256_broadcast_ss(e + j);
      const uint16_t* row = v + j * v_stride + d0;
      for (int c = 0; c < kDimTile / 8; ++c) {
        a[c] = _mm256_fmadd_ps(ej, LoadHalves8(row + 8 * c), a[c]);
      }
    }
    for (int c = 0; c < kDimTile / 8; ++c) _mm256_storeu_ps(partial + 2 + d0 + 8 * c, a[c]);
  }
}

}  // namespace

// REQUIRES: head_dim % 64 == 0 (AttendKvBlock dispatches only such sizes).
void AttendKvBlockAvx2(const KvBlockQuery* queries, int count, const uint16_t* kt,
                       const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                       float* partials) {
  for (int i = 0; i < count; ++i) {
    AttendOne(queries[i], kt, v, v_stride, head_dim, scale,
              partials + i * KvBlockPartialFloats(head_dim));
  }
}

void MergeKvBlockPartialAvx2(const float* partial, int head_dim, float* state) {
  const float m = std::max(state[0], partial[0]);
  // The scalar exp of the same order (bitwise ExpApprox8's).
  const float x = ExpApprox<GgmlOrder::kAvx512>(state[0] - m);
  const float y = ExpApprox<GgmlOrder::kAvx512>(partial[0] - m);
  state[0] = m;
  state[1] = std::fma(state[1], x, partial[1] * y);
  const __m256 vx = _mm256_set1_ps(x), vy = _mm256_set1_ps(y);
  for (int d = 0; d < head_dim; d += 8) {
    float* a = state + 2 + d;
    _mm256_storeu_ps(a, _mm256_fmadd_ps(_mm256_loadu_ps(a), vx,
                                        _mm256_mul_ps(_mm256_loadu_ps(partial + 2 + d), vy)));
  }
}

}  // namespace splitspec::kernels::internal
