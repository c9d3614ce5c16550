// exp(x) as llama.cpp's CPU backend computes it for softmax and SiLU on x86 with
// AVX-512 (ggml's vectorized expf): a degree-5 polynomial on the reduced argument
// b = x - n*ln2 (n = round(x / ln2), ln2 split in two parts), scaled by 2^n.
// Error about 1.5 ulp against the exact exp; what matters here is that both
// engines round identically, so that attention probabilities and SiLU outputs are
// bitwise the same as llama.cpp's when the inputs are.
//
//   float e = kernels::ExpApprox(x);                 // scalar reference
//   __m256 e8 = kernels::ExpApprox8(_mm256_loadu_ps(p));  // AVX2 + FMA, same bits
//
// Both perform the same IEEE float operations (fused multiply-adds where the
// original fuses), so they agree bitwise for every input. Inputs above ~88.7
// give +inf, inputs below ~-87.3 give 0 (ggml returns subnormals down to -103.97;
// no caller can tell: such values vanish in the half-precision probabilities and
// against 1 in the sums). NaN gives NaN.
#ifndef SPLITSPEC_KERNELS_CPU_EXP_APPROX_H_
#define SPLITSPEC_KERNELS_CPU_EXP_APPROX_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace splitspec::kernels {

namespace exp_approx_internal {
inline constexpr float kShift = 0x1.8p23f;  // adding it rounds to an integer
inline constexpr float kInvLn2 = 0x1.715476p+0f;
inline constexpr float kLn2Hi = 0x1.62e4p-1f;
inline constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
inline constexpr float kC1 = 0x1.ffffecp-1f;
inline constexpr float kC2 = 0x1.fffdb6p-2f;
inline constexpr float kC3 = 0x1.555e66p-3f;
inline constexpr float kC4 = 0x1.573e2ep-5f;
inline constexpr float kC5 = 0x1.0e4020p-7f;

// 2^n for integral n in [-126, 127].
inline float Pow2(int n) {
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
}  // namespace exp_approx_internal

inline float ExpApprox(float x) {
  using namespace exp_approx_internal;
  const float z = std::fma(x, kInvLn2, kShift);
  const float n = z - kShift;
  const float b = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(kC5, b, kC4), u, std::fma(kC3, b, kC2)), u,
                           std::fma(kC1, b, 1.0f));
  if (!(n >= -126.0f)) return n != n ? n : 0.0f;  // NaN stays NaN; underflow gives 0
  if (n <= 127.0f) return j * Pow2(static_cast<int>(n));
  return (j * Pow2(64)) * Pow2(static_cast<int>(n) - 64);  // overflows to inf from ~88.7
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline __m256 ExpApprox8(__m256 x) {
  using namespace exp_approx_internal;
  const __m256 shift = _mm256_set1_ps(kShift);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(kInvLn2), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(kC5), b, _mm256_set1_ps(kC4)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(kC3), b, _mm256_set1_ps(kC2))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(kC1), b, _mm256_set1_ps(1.0f)));
  // 2^n from the exponent bits, n clamped to [-126, 127]; larger n multiply twice.
  const __m256 lo = _mm256_set1_ps(-126.0f), hi = _mm256_set1_ps(127.0f);
  const __m256 n1 = _mm256_min_ps(_mm256_max_ps(n, lo), hi);
  const __m256 n2 = _mm256_max_ps(_mm256_sub_ps(n, hi), _mm256_setzero_ps());  // 0 unless n > 127
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n1), bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(n2, hi)), bias), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
  // Underflow (n < -126) gives 0; NaN inputs keep their NaN.
  const __m256 under = _mm256_cmp_ps(n, lo, _CMP_LT_OQ);
  result = _mm256_andnot_ps(under, result);
  return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_EXP_APPROX_H_
