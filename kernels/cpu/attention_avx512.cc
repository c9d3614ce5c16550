// AVX-512 path of the block attention order (attention.h). Up to four queries of a tile
// share every key and value vector converted from half precision: the score chains of
// a tile are 4 queries x 4 vectors of 16 positions, the value chains 4 queries x 64
// output elements, all in registers. The same float operations as the reference, so the
// same bits.
// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header (as in matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/exp_approx.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kVectors = kKvBlockPositions / 16;  // 4 vectors of 16 positions
constexpr int kTile = 4;                          // queries sharing each converted vector
constexpr int kDimTile = 64;                      // output elements per pass of the value chains

inline __m512 LoadHalves16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// exp of the order on 16 lanes: ExpApprox8 on each half (the same operations per lane).
inline __m512 Exp16(__m512 x) {
  const __m256 lo = ExpApprox8<GgmlOrder::kAvx512>(_mm512_castps512_ps256(x));
  const __m256 hi = ExpApprox8<GgmlOrder::kAvx512>(_mm512_extractf32x8_ps(x, 1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

// The 16-lane sum (attention.h): vector c holds positions 16c .. 16c + 15, lane i of
// each the positions j % 16 == i; then the folds h = 8, 4, 2, 1.
inline float SixteenLaneSum(const __m512 (&e)[kVectors]) {
  __m512 lanes = _mm512_setzero_ps();
  for (int c = 0; c < kVectors; ++c) lanes = _mm512_add_ps(lanes, e[c]);
  const __m256 x8 =
      _mm256_add_ps(_mm512_extractf32x8_ps(lanes, 1), _mm512_castps512_ps256(lanes));  // h = 8
  __m128 u = _mm_add_ps(_mm256_extractf128_ps(x8, 1), _mm256_castps256_ps128(x8));     // h = 4
  u = _mm_add_ps(u, _mm_movehl_ps(u, u));                                              // h = 2
  u = _mm_add_ss(u, _mm_movehdup_ps(u));                                               // h = 1
  return _mm_cvtss_f32(u);
}

// Queries [0, kCount) of a tile; kCount <= kTile.
template <int kCount>
void AttendTile(const KvBlockQuery* queries, const uint16_t* kt, const uint16_t* v,
                int64_t v_stride, int head_dim, float scale, float* partials) {
  int n_max = 0, n_min = kKvBlockPositions;
  for (int g = 0; g < kCount; ++g) {
    n_max = std::max(n_max, queries[g].n);
    n_min = std::min(n_min, queries[g].n);
  }
  const int used = (n_max + 15) / 16;
  // Score chains: s[g][c] lanes = positions 16c .. 16c + 15 of query g.
  __m512 s[kCount][kVectors];
  for (int g = 0; g < kCount; ++g) {
    for (int c = 0; c < kVectors; ++c) s[g][c] = _mm512_setzero_ps();
  }
  if (used == kVectors) {
    for (int d = 0; d < head_dim; ++d) {
      const uint16_t* row = kt + d * kKvBlockPositions;
      __m512 k[kVectors];
      for (int c = 0; c < kVectors; ++c) k[c] = LoadHalves16(row + 16 * c);
      for (int g = 0; g < kCount; ++g) {
        const __m512 qd = _mm512_set1_ps(queries[g].q[d]);
        for (int c = 0; c < kVectors; ++c) s[g][c] = _mm512_fmadd_ps(qd, k[c], s[g][c]);
      }
    }
  } else {  // a last, partial block: only the vectors holding attended positions
    for (int d = 0; d < head_dim; ++d) {
      const uint16_t* row = kt + d * kKvBlockPositions;
      for (int c = 0; c < used; ++c) {
        const __m512 k = LoadHalves16(row + 16 * c);
        for (int g = 0; g < kCount; ++g) {
          s[g][c] = _mm512_fmadd_ps(_mm512_set1_ps(queries[g].q[d]), k, s[g][c]);
        }
      }
    }
  }
  alignas(64) float e[kCount][kKvBlockPositions];
  for (int g = 0; g < kCount; ++g) {
    const int n = queries[g].n;
    __mmask16 valid[kVectors];
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < kVectors; ++c) {
      const int in_vector = std::clamp(n - 16 * c, 0, 16);
      const int masked = std::clamp(queries[g].first - 16 * c, 0, 16);  // before `first`
      valid[c] = static_cast<__mmask16>(((1u << in_vector) - 1u) & ~((1u << masked) - 1u));
      s[g][c] =
          _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid[c], s[g][c], _mm512_set1_ps(scale));
      vmax = _mm512_max_ps(vmax, s[g][c]);
    }
    const float m = _mm512_reduce_max_ps(vmax);
    for (int c = 0; c < kVectors; ++c) {
      s[g][c] = _mm512_maskz_mov_ps(valid[c], Exp16(_mm512_sub_ps(s[g][c], _mm512_set1_ps(m))));
      _mm512_store_ps(e[g] + 16 * c, s[g][c]);
    }
    float* partial = partials + g * KvBlockPartialFloats(head_dim);
    partial[0] = m;
    partial[1] = SixteenLaneSum(s[g]);
  }
  for (int d0 = 0; d0 < head_dim; d0 += kDimTile) {
    __m512 a[kCount][kDimTile / 16];
    for (int g = 0; g < kCount; ++g) {
      for (auto& x : a[g]) x = _mm512_setzero_ps();
    }
    int j = 0;
    for (; j < n_min; ++j) {  // every query of the tile attends to j
      const uint16_t* row = v + j * v_stride + d0;
      __m512 vr[kDimTile / 16];
      for (int c = 0; c < kDimTile / 16; ++c) vr[c] = LoadHalves16(row + 16 * c);
      for (int g = 0; g < kCount; ++g) {
        const __m512 ej = _mm512_set1_ps(e[g][j]);
        for (int c = 0; c < kDimTile / 16; ++c) a[g][c] = _mm512_fmadd_ps(ej, vr[c], a[g][c]);
      }
    }
    for (; j < n_max; ++j) {
      const uint16_t* row = v + j * v_stride + d0;
      __m512 vr[kDimTile / 16];
      for (int c = 0; c < kDimTile / 16; ++c) vr[c] = LoadHalves16(row + 16 * c);
      for (int g = 0; g < kCount; ++g) {
        if (j >= queries[g].n) continue;
        const __m512 ej = _mm512_set1_ps(e[g][j]);
        for (int c = 0; c < kDimTile / 16; ++c) a[g][c] = _mm512_fmadd_ps(ej, vr[c], a[g][c]);
      }
    }
    for (int g = 0; g < kCount; ++g) {
      float* out = partials + g * KvBlockPartialFloats(head_dim) + 2 + d0;
      for (int c = 0; c < kDimTile / 16; ++c) _mm512_storeu_ps(out + 16 * c, a[g][c]);
    }
  }
}

}  // namespace

// REQUIRES: head_dim % 64 == 0 (AttendKvBlock dispatches only such sizes).
void AttendKvBlockAvx512(const KvBlockQuery* queries, int count, const uint16_t* kt,
                         const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                         float* partials) {
  const int64_t stride = KvBlockPartialFloats(head_dim);
  int i = 0;
  for (; i + kTile <= count; i += kTile) {
    AttendTile<kTile>(queries + i, kt, v, v_stride, head_dim, scale, partials + i * stride);
  }
  float* rest_partials = partials + i * stride;
  switch (count - i) {
    case 3:
      return AttendTile<3>(queries + i, kt, v, v_stride, head_dim, scale, rest_partials);
    case 2:
      return AttendTile<2>(queries + i, kt, v, v_stride, head_dim, scale, rest_partials);
    case 1:
      return AttendTile<1>(queries + i, kt, v, v_stride, head_dim, scale, rest_partials);
  }
}

}  // namespace splitspec::kernels::internal
