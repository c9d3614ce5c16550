// The q8_0 attention order (attention_q8.h) with AVX-512 VNNI scores: 16 positions per
// vector, vpdpbusd on (key quant + 128, query quant) and the exact correction
// -128 * sum(query quants) per block, so the integer block dots are the reference's.
// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header (as in attention_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_exp_avx512.h"
#include "kernels/cpu/attention_q8.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kGroupBytes = 4 * kKvBlockPositions;  // 4 dims of the block's 64 positions

constexpr int kVectors = kKvBlockPositions / 16;  // 4 vectors of 16 positions

// ScoresAvx512 for kCount queries at once: each biased key vector is loaded once and
// used by every query's vpdpbusd (the same integer sums and float steps per query).
template <int kCount>
void ScoresTileAvx512(const KvBlockQueryQ8* queries, int n, float scale, const KvBlockQ8Rows& rows,
                      int head_dim, float (*s)[kKvBlockPositions]) {
  const int blocks = head_dim / kQ8BlockValues;
  int32_t bias[kCount][256 / kQ8BlockValues];
  for (int q = 0; q < kCount; ++q) {
    for (int b = 0; b < blocks; ++b) {
      int32_t sum = 0;
      for (int k = 0; k < kQ8BlockValues; ++k) sum += queries[q].qq[b * kQ8BlockValues + k];
      bias[q][b] = 128 * sum;
    }
  }
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int p = 0; p < n; p += 16) {
    __m512 chain[kCount];
    for (int q = 0; q < kCount; ++q) chain[q] = _mm512_setzero_ps();
    for (int b = 0; b < blocks; ++b) {
      __m512i acc[kCount];
      for (int q = 0; q < kCount; ++q) acc[q] = _mm512_setzero_si512();
      for (int g = 0; g < kQ8BlockValues / 4; ++g) {
        const int group = b * (kQ8BlockValues / 4) + g;
        const __m512i k = _mm512_xor_si512(
            _mm512_loadu_si512(rows.kq + group * kGroupBytes + p * 4), flip);
        for (int q = 0; q < kCount; ++q) {
          int32_t q4;
          __builtin_memcpy(&q4, queries[q].qq + group * 4, 4);
          acc[q] = _mm512_dpbusd_epi32(acc[q], k, _mm512_set1_epi32(q4));
        }
      }
      const __m512 dk = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.kd + b * kKvBlockPositions + p)));
      for (int q = 0; q < kCount; ++q) {
        const __m512 isum =
            _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[q], _mm512_set1_epi32(bias[q][b])));
        chain[q] = _mm512_fmadd_ps(isum, _mm512_mul_ps(_mm512_set1_ps(queries[q].dq[b]), dk),
                                   chain[q]);
      }
    }
    for (int q = 0; q < kCount; ++q) {
      _mm512_store_ps(s[q] + p, _mm512_mul_ps(chain[q], _mm512_set1_ps(scale)));
    }
  }
}
constexpr int kTile = 4;                          // queries sharing each widened value vector
constexpr int kDimTile = 64;                      // output elements per pass of the value chains

// q8_internal::FinishPartialReference's softmax, 16 lanes at a time: the max over the
// attended positions (exact in any order), e_j by ExpOfNonPositive16 (the scalar exp's
// bits) with masked positions 0 (stored back into s), the 16-lane sum as the reference's
// lanes (vector c holds positions 16c..16c+15). Writes partial[0] = m, partial[1] = l.
void SoftmaxAvx512(float* s, int n, int first, float* partial) {
  const int used = (n + 15) / 16;
  __mmask16 valid[kVectors];
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int c = 0; c < used; ++c) {
    const int lo = std::max(first - 16 * c, 0), hi = std::min(n - 16 * c, 16);
    valid[c] = hi <= lo ? 0 : static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
    vmax = _mm512_mask_max_ps(vmax, valid[c], vmax, _mm512_load_ps(s + 16 * c));
  }
  const float m = _mm512_reduce_max_ps(vmax);
  __m512 x[kVectors];  // s_j - m <= 0 where attended (the other lanes are masked below)
  for (int c = 0; c < kVectors; ++c) {
    x[c] = c < used ? _mm512_sub_ps(_mm512_load_ps(s + 16 * c), _mm512_set1_ps(m))
                    : _mm512_setzero_ps();
  }
  ExpOfNonPositive16(x);
  __m512 lanes = _mm512_setzero_ps();
  for (int c = 0; c < used; ++c) {
    const __m512 e = _mm512_maskz_mov_ps(valid[c], x[c]);
    lanes = _mm512_add_ps(lanes, e);
    _mm512_store_ps(s + 16 * c, e);
  }
  const __m256 x8 =
      _mm256_add_ps(_mm512_extractf32x8_ps(lanes, 1), _mm512_castps512_ps256(lanes));  // h = 8
  __m128 u = _mm_add_ps(_mm256_extractf128_ps(x8, 1), _mm256_castps256_ps128(x8));     // h = 4
  u = _mm_add_ps(u, _mm_movehl_ps(u, u));                                              // h = 2
  u = _mm_add_ss(u, _mm_movehdup_ps(u));                                               // h = 1
  partial[0] = m;
  partial[1] = _mm_cvtss_f32(u);
}

// The value chains of kCount queries (e[q][j]: their e_j, 0 where masked; n[q]: their
// ends): a_d = fma(e_j, dv * vq, a_d) in increasing j for each query, each widened value
// vector (dv * vq: exact) shared by the tile. Output elements [d0, d0 + kDimTile) per pass.
template <int kCount>
void ValueChainsAvx512(const float (*e)[kKvBlockPositions], const int* n, const KvBlockQ8Rows& rows,
                       int head_dim, float* const* partials) {
  int max_n = 0;
  for (int q = 0; q < kCount; ++q) max_n = std::max(max_n, n[q]);
  for (int d0 = 0; d0 < head_dim; d0 += kDimTile) {
    const int vectors = std::min(kDimTile, head_dim - d0) / 16;  // 2 or 4
    __m512 a[kCount][kDimTile / 16];
    for (int q = 0; q < kCount; ++q) {
      for (int k = 0; k < kDimTile / 16; ++k) a[q][k] = _mm512_setzero_ps();
    }
    for (int j = 0; j < max_n; ++j) {
      const int8_t* vq = rows.vq + j * rows.vq_stride + d0;
      const uint16_t* vd = rows.vd + j * rows.vd_stride + d0 / kQ8BlockValues;
      for (int k = 0; k < vectors; ++k) {
        const __m512 dv = _mm512_set1_ps(_cvtsh_ss(vd[k / 2]));
        const __m512 v = _mm512_mul_ps(
            dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(vq + 16 * k)))));
        for (int q = 0; q < kCount; ++q) {
          // Past a query's n its e_j are not part of its chain: skip (not +0: the
          // reference's chain ends at n).
          if (j < n[q]) a[q][k] = _mm512_fmadd_ps(_mm512_set1_ps(e[q][j]), v, a[q][k]);
        }
      }
    }
    for (int q = 0; q < kCount; ++q) {
      for (int k = 0; k < vectors; ++k) _mm512_storeu_ps(partials[q] + 2 + d0 + 16 * k, a[q][k]);
    }
  }
}

template <int kCount>
void AttendTile(const KvBlockQueryQ8* queries, const KvBlockQ8Rows& rows, int head_dim,
                float scale, float* partials) {
  alignas(64) float e[kCount][kKvBlockPositions];
  int n[kCount];
  float* outs[kCount];
  int max_n = 0;
  for (int q = 0; q < kCount; ++q) {
    n[q] = queries[q].n;
    max_n = std::max(max_n, n[q]);
    outs[q] = partials + q * KvBlockPartialFloats(head_dim);
  }
  ScoresTileAvx512<kCount>(queries, max_n, scale, rows, head_dim, e);
  for (int q = 0; q < kCount; ++q) SoftmaxAvx512(e[q], n[q], queries[q].first, outs[q]);
  ValueChainsAvx512<kCount>(e, n, rows, head_dim, outs);
}

}  // namespace

void AttendKvBlockQ8Avx512(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                           int head_dim, float scale, float* partials) {
  const int64_t stride = KvBlockPartialFloats(head_dim);
  int i = 0;
  for (; i + kTile <= count; i += kTile) {
    AttendTile<kTile>(queries + i, rows, head_dim, scale, partials + i * stride);
  }
  switch (count - i) {
    case 3: AttendTile<3>(queries + i, rows, head_dim, scale, partials + i * stride); break;
    case 2: AttendTile<2>(queries + i, rows, head_dim, scale, partials + i * stride); break;
    case 1: AttendTile<1>(queries + i, rows, head_dim, scale, partials + i * stride); break;
    default: break;
  }
}

}  // namespace splitspec::kernels::internal
