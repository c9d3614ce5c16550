// The q8_0 attention order (attention_q8.h) with AVX-512 VNNI scores: 16 positions per
// vector, vpdpbusd on (key quant + 128, query quant) and the exact correction
// -128 * sum(query quants) per block, so the integer block dots are the reference's.
// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header (as in attention_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

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

}  // namespace

void AttendKvBlockQ8Avx512(const KvBlockQuery* queries, int count, const KvBlockQ8Rows& rows,
                           int head_dim, float scale, float* partials) {
  q8_internal::AttendQ8(queries, count, rows, head_dim, scale, partials,
                        [&](const int8_t* qq, const float* dq, int n, float sc, float* s) {
                          ScoresAvx512(qq, dq, n, sc, rows, head_dim, s);
                        });
}

}  // namespace splitspec::kernels::internal
