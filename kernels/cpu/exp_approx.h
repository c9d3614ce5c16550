// exp(x) as llama.cpp's CPU backend computes it for softmax and SiLU on x86 (ggml's
// vectorized expf), in both of its x86 builds (GgmlOrder, cpu_features.h): a
// degree-5 polynomial on the reduced argument b = x - n*ln2 (n = round(x / ln2), ln2
// split in two parts), scaled by 2^n. The AVX-512 build adds the 1 inside the
// polynomial and scales with vscalefps; the AVX2 build keeps it out and finishes
// with fma(j, 2^n, 2^n). The two differ in the last bit for some inputs, and that
// bit matters here: attention probabilities and SiLU outputs must be bitwise
// llama.cpp's when the inputs are. Error about 1.5 ulp against the exact exp.
//
//   float e = kernels::ExpApprox<GgmlOrder::kAvx2>(x);        // scalar reference
//   __m256 e8 = kernels::ExpApprox8<GgmlOrder::kAvx2>(v);     // AVX2 + FMA, same bits
//
// For each order the scalar and the vector function perform the same IEEE float
// operations (fused multiply-adds where the original fuses), so they agree bitwise
// for every input. NaN gives NaN; inputs above ~88.7 give +inf. Below ~-87.3 the
// AVX-512 order gives 0 (ggml returns subnormals down to -103.97; no caller can
// tell: such values vanish in the half-precision probabilities and against 1 in the
// sums); the AVX2 order follows ggml's own special case and gives its subnormals.
#ifndef SPLITSPEC_KERNELS_CPU_EXP_APPROX_H_
#define SPLITSPEC_KERNELS_CPU_EXP_APPROX_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_features.h"

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

inline float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// 2^n for integral n in [-126, 127].
inline float Pow2(int n) { return FloatFromBits(static_cast<uint32_t>(n + 127) << 23); }
}  // namespace exp_approx_internal

// ggml_v_expf of the AVX-512 build.
inline float ExpApproxAvx512Order(float x) {
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
namespace exp_approx_internal {
// The steps both orders share: z = x / ln2 + 1.5 * 2^23 (n in its low bits),
// n = round(x / ln2), b = x - n * ln2, u = b * b, and the polynomial's upper part
// (c5 b + c4) u + (c3 b + c2).
struct Reduced8 {
  __m256 z, n, b, u, upper;
};

__attribute__((target("avx2,fma"))) inline Reduced8 Reduce8(__m256 x) {
  Reduced8 r;
  const __m256 shift = _mm256_set1_ps(kShift);
  r.z = _mm256_fmadd_ps(x, _mm256_set1_ps(kInvLn2), shift);
  r.n = _mm256_sub_ps(r.z, shift);
  r.b = _mm256_fnmadd_ps(r.n, _mm256_set1_ps(kLn2Lo),
                         _mm256_fnmadd_ps(r.n, _mm256_set1_ps(kLn2Hi), x));
  r.u = _mm256_mul_ps(r.b, r.b);
  r.upper = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(kC5), r.b, _mm256_set1_ps(kC4)), r.u,
                            _mm256_fmadd_ps(_mm256_set1_ps(kC3), r.b, _mm256_set1_ps(kC2)));
  return r;
}
}  // namespace exp_approx_internal

__attribute__((target("avx2,fma"))) inline __m256 ExpApprox8Avx512Order(__m256 x) {
  using namespace exp_approx_internal;
  const Reduced8 r = Reduce8(x);
  const __m256 n = r.n;
  const __m256 j = _mm256_fmadd_ps(r.upper, r.u,
                                   _mm256_fmadd_ps(_mm256_set1_ps(kC1), r.b, _mm256_set1_ps(1.0f)));
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

// ggml_v_expf of the AVX2 build. k = 2^n is built from z's low bits, which hold n;
// |n| > 126 takes ggml's scaled path (two factors s1 * s2, or s1 * s1 past 192).
inline float ExpApproxAvx2Order(float x) {
  using namespace exp_approx_internal;
  const float z = std::fma(x, kInvLn2, kShift);
  const float n = z - kShift;
  const float b = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  uint32_t z_bits;
  std::memcpy(&z_bits, &z, sizeof(z_bits));
  const uint32_t e = z_bits << 23;
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(kC5, b, kC4), u, std::fma(kC3, b, kC2)), u, kC1 * b);
  if (!(std::fabs(n) > 126.0f)) {
    const float k = FloatFromBits(e + 0x3f800000u);  // 2^n
    return std::fma(j, k, k);
  }
  const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
  const float s1 = FloatFromBits(g + 0x7f000000u);
  if (std::fabs(n) > 192.0f) return s1 * s1;
  const float s2 = FloatFromBits(e - g);
  return std::fma(s2, j, s2) * s1;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline __m256 ExpApprox8Avx2Order(__m256 x) {
  using namespace exp_approx_internal;
  const Reduced8 r = Reduce8(x);
  const __m256 n = r.n;
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(r.z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 scaled = _mm256_cmp_ps(abs_n, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 j = _mm256_fmadd_ps(r.upper, r.u, _mm256_mul_ps(_mm256_set1_ps(kC1), r.b));
  const __m256 plain = _mm256_fmadd_ps(j, k, k);
  if (_mm256_movemask_ps(scaled) == 0) return plain;
  const __m256i g =
      _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                       _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 far = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 near = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
  return _mm256_blendv_ps(plain, _mm256_blendv_ps(near, _mm256_mul_ps(s1, s1), far), scaled);
}
#endif

// The order's expf: ExpApprox<GgmlOrder::kAvx2>(x) and, on x86, ExpApprox8<...>(v).
template <GgmlOrder kOrder>
inline float ExpApprox(float x) {
  if constexpr (kOrder == GgmlOrder::kAvx512) {
    return ExpApproxAvx512Order(x);
  } else {
    return ExpApproxAvx2Order(x);
  }
}

#if defined(__x86_64__)
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma"))) inline __m256 ExpApprox8(__m256 x) {
  if constexpr (kOrder == GgmlOrder::kAvx512) {
    return ExpApprox8Avx512Order(x);
  } else {
    return ExpApprox8Avx2Order(x);
  }
}
#endif

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_EXP_APPROX_H_
