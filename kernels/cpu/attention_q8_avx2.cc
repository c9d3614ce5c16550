// The q8_0 attention order (attention_q8.h) with AVX2 scores: 8 positions per vector,
// vpmaddubsw on (|query quant|, key quant with the query's sign) then vpmaddwd, exact
// (each 16-bit pair sum <= 2 * 127 * 127 fits), so the integer block dots are the
// reference's.
#include <immintrin.h>

#include "kernels/cpu/attention_q8.h"
#include "kernels/cpu/attention_q8_impl.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kGroupBytes = 4 * kKvBlockPositions;  // 4 dims of the block's 64 positions

void ScoresAvx2(const int8_t* qq, const float* dq, int n, float scale, const KvBlockQ8Rows& rows,
                int head_dim, float* s) {
  const int blocks = head_dim / kQ8BlockValues;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int p = 0; p < n; p += 8) {
    __m256 chain = _mm256_setzero_ps();
    for (int b = 0; b < blocks; ++b) {
      __m256i acc = _mm256_setzero_si256();
      for (int g = 0; g < kQ8BlockValues / 4; ++g) {
        const int group = b * (kQ8BlockValues / 4) + g;
        const __m256i k = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(rows.kq + group * kGroupBytes + p * 4));
        int32_t q4;
        __builtin_memcpy(&q4, qq + group * 4, 4);
        const __m256i q = _mm256_set1_epi32(q4);
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(k, q));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
      }
      const __m256 dk = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.kd + b * kKvBlockPositions + p)));
      chain = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_mul_ps(_mm256_set1_ps(dq[b]), dk),
                              chain);
    }
    _mm256_store_ps(s + p, _mm256_mul_ps(chain, _mm256_set1_ps(scale)));
  }
}

}  // namespace

void AttendKvBlockQ8Avx2(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                         int head_dim, float scale, float* partials) {
  q8_internal::AttendQ8(
      queries, count, head_dim, scale, partials,
      [&](const int8_t* qq, const float* dq, int n, float sc, float* s) {
        ScoresAvx2(qq, dq, n, sc, rows, head_dim, s);
      },
      [&](float* s, int n, int first, float* partial) {
        q8_internal::FinishPartialReference(s, n, first, rows, head_dim, partial);
      });
}

}  // namespace splitspec::kernels::internal
