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

#include "kernels/cpu/attention_q8.h"
#include "kernels/cpu/attention_q8_impl.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kGroupBytes = 4 * kKvBlockPositions;  // 4 dims of the block's 64 positions

void ScoresAvx512(const int8_t* qq, const float* dq, int n, float scale, const KvBlockQ8Rows& rows,
                  int head_dim, float* s) {
  const int blocks = head_dim / kQ8BlockValues;
  int32_t bias[256 / kQ8BlockValues];  // 128 * sum of the block's query quants
  for (int b = 0; b < blocks; ++b) {
    int32_t sum = 0;
    for (int k = 0; k < kQ8BlockValues; ++k) sum += qq[b * kQ8BlockValues + k];
    bias[b] = 128 * sum;
  }
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int p = 0; p < n; p += 16) {
    __m512 chain = _mm512_setzero_ps();
    for (int b = 0; b < blocks; ++b) {
      __m512i acc = _mm512_setzero_si512();
      for (int g = 0; g < kQ8BlockValues / 4; ++g) {
        const int group = b * (kQ8BlockValues / 4) + g;
        const __m512i k = _mm512_xor_si512(
            _mm512_loadu_si512(rows.kq + group * kGroupBytes + p * 4), flip);
        int32_t q4;
        __builtin_memcpy(&q4, qq + group * 4, 4);
        acc = _mm512_dpbusd_epi32(acc, k, _mm512_set1_epi32(q4));
      }
      const __m512 isum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_set1_epi32(bias[b])));
      const __m512 dk = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.kd + b * kKvBlockPositions + p)));
      chain = _mm512_fmadd_ps(isum, _mm512_mul_ps(_mm512_set1_ps(dq[b]), dk), chain);
    }
    _mm512_store_ps(s + p, _mm512_mul_ps(chain, _mm512_set1_ps(scale)));
  }
}

// q8_internal::FinishPartialReference's operations, 16 lanes at a time: the max over
// the attended positions (exact in any order), e_j by ExpApprox8<kAvx512> (the scalar
// exp's bits) with masked positions 0, the 16-lane sum as the reference's lanes (vector c
// holds positions 16c..16c+15), and the value chains with all head_dim accumulators in
// registers, each advancing in increasing j.
void FinishPartialAvx512(float* s, int n, int first, const KvBlockQ8Rows& rows, int head_dim,
                         float* partial) {
  constexpr int kVectors = kKvBlockPositions / 16;
  const int used = (n + 15) / 16;
  __mmask16 valid[kVectors];
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int c = 0; c < kVectors; ++c) {
    const int lo = std::max(first - 16 * c, 0), hi = std::min(n - 16 * c, 16);
    valid[c] = hi <= lo ? 0
                        : static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
    if (c < used) vmax = _mm512_mask_max_ps(vmax, valid[c], vmax, _mm512_load_ps(s + 16 * c));
  }
  const float m = _mm512_reduce_max_ps(vmax);
  __m512 lanes = _mm512_setzero_ps();
  for (int c = 0; c < used; ++c) {
    const __m512 x = _mm512_sub_ps(_mm512_load_ps(s + 16 * c), _mm512_set1_ps(m));
    const __m256 e_lo = ExpApprox8<GgmlOrder::kAvx512>(_mm512_castps512_ps256(x));
    const __m256 e_hi = ExpApprox8<GgmlOrder::kAvx512>(_mm512_extractf32x8_ps(x, 1));
    const __m512 e = _mm512_maskz_mov_ps(
        valid[c], _mm512_insertf32x8(_mm512_castps256_ps512(e_lo), e_hi, 1));
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
  const int blocks = head_dim / kQ8BlockValues;
  __m512 a[2 * (256 / kQ8BlockValues)];
  for (int k = 0; k < 2 * blocks; ++k) a[k] = _mm512_setzero_ps();
  for (int j = 0; j < n; ++j) {
    const __m512 e = _mm512_set1_ps(s[j]);
    const int8_t* vq = rows.vq + j * rows.vq_stride;
    const uint16_t* vd = rows.vd + j * rows.vd_stride;
    for (int b = 0; b < blocks; ++b) {
      const __m512 dv = _mm512_set1_ps(Fp16ToFloat(vd[b]));
      for (int h = 0; h < 2; ++h) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(vq + b * kQ8BlockValues + 16 * h))));
        a[2 * b + h] = _mm512_fmadd_ps(e, _mm512_mul_ps(dv, v), a[2 * b + h]);
      }
    }
  }
  for (int k = 0; k < 2 * blocks; ++k) _mm512_storeu_ps(partial + 2 + 16 * k, a[k]);
}

}  // namespace

void AttendKvBlockQ8Avx512(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                           int head_dim, float scale, float* partials) {
  q8_internal::AttendQ8(
      queries, count, head_dim, scale, partials,
      [&](const int8_t* qq, const float* dq, int n, float sc, float* s) {
        ScoresAvx512(qq, dq, n, sc, rows, head_dim, s);
      },
      [&](float* s, int n, int first, float* partial) {
        FinishPartialAvx512(s, n, first, rows, head_dim, partial);
      });
}

}  // namespace splitspec::kernels::internal
