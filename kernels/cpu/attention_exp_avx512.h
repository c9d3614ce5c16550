// The softmax exp of the AVX-512 attention paths (attention_avx512.cc, the f16 cache;
// attention_q8_avx512.cc, the q8_0 cache), 16 lanes at a time. Include only from
// translation units compiled for AVX-512 (kernels/CMakeLists.txt's avx512 sources).
//
//   __m512 x[4] = {...};        // s_j - m: <= 0 (or NaN)
//   ExpOfNonPositive16(x);      // x[i] lane l <- ExpApprox<GgmlOrder::kAvx512>(x[i] lane l)
#ifndef SPLITSPEC_KERNELS_CPU_ATTENTION_EXP_AVX512_H_
#define SPLITSPEC_KERNELS_CPU_ATTENTION_EXP_AVX512_H_

#include <immintrin.h>

#include "kernels/cpu/exp_approx.h"

namespace splitspec::kernels::internal {

// ExpApprox<GgmlOrder::kAvx512> (exp_approx.h) on 16 lanes of kN vectors at once, for
// arguments <= 0 or NaN (a softmax's s_j - m, where m is the max of the s_j): the same
// bits as the scalar function for those. Each step is applied to every vector before the
// next step, so the kN dependency chains are in flight together. With x <= 0, n =
// round(x / ln2) <= 0, so the scalar function's second factor 2^max(n - 127, 0) is 1 and
// its j * 2^n (n >= -126) is one correctly rounded product of j and a power of two, which
// is what vscalefps(j, n) computes: one instruction instead of building 2^n from bits
// and multiplying twice (perf: the softmax was about 15% of the kernel's time).
template <int kN>
inline void ExpOfNonPositive16(__m512 (&x)[kN]) {
  using namespace exp_approx_internal;
  const __m512 shift = _mm512_set1_ps(kShift);
  const __m512 lo = _mm512_set1_ps(-126.0f);
  __m512 n[kN], b[kN], u[kN], upper[kN];
  for (int i = 0; i < kN; ++i) {
    n[i] = _mm512_sub_ps(_mm512_fmadd_ps(x[i], _mm512_set1_ps(kInvLn2), shift), shift);
  }
  for (int i = 0; i < kN; ++i) {
    b[i] = _mm512_fnmadd_ps(n[i], _mm512_set1_ps(kLn2Lo),
                            _mm512_fnmadd_ps(n[i], _mm512_set1_ps(kLn2Hi), x[i]));
  }
  for (int i = 0; i < kN; ++i) u[i] = _mm512_mul_ps(b[i], b[i]);
  for (int i = 0; i < kN; ++i) {
    upper[i] =
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(kC5), b[i], _mm512_set1_ps(kC4)), u[i],
                        _mm512_fmadd_ps(_mm512_set1_ps(kC3), b[i], _mm512_set1_ps(kC2)));
  }
  for (int i = 0; i < kN; ++i) {
    const __m512 j = _mm512_fmadd_ps(
        upper[i], u[i], _mm512_fmadd_ps(_mm512_set1_ps(kC1), b[i], _mm512_set1_ps(1.0f)));
    const __m512 result = _mm512_scalef_ps(j, n[i]);
    // Underflow (n < -126) gives 0; NaN inputs keep their NaN.
    const __mmask16 under = _mm512_cmp_ps_mask(n[i], lo, _CMP_LT_OQ);
    const __mmask16 nan = _mm512_cmp_ps_mask(x[i], x[i], _CMP_UNORD_Q);
    x[i] =
        _mm512_mask_mov_ps(_mm512_maskz_mov_ps(static_cast<__mmask16>(~under), result), nan, x[i]);
  }
}

}  // namespace splitspec::kernels::internal

#endif  // SPLITSPEC_KERNELS_CPU_ATTENTION_EXP_AVX512_H_
