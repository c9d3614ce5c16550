#include "kernels/cpu/quant_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"

namespace splitspec::kernels {
namespace {

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void FloatsToFp16F16c(const float* x, int64_t n,
                                                             uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToFp16(x[i]);
}
#endif

}  // namespace

uint16_t FloatToFp16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs_bits = bits & 0x7FFFFFFF;
  if (abs_bits >= 0x7F800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    return sign | 0x7C00 | (abs_bits > 0x7F800000u ? 0x200 : 0);
  }
  if (abs_bits >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65536: overflow
  const int exponent = static_cast<int>(abs_bits >> 23) - 127;
  uint32_t mantissa = (abs_bits & 0x7FFFFF) | 0x800000;  // with the implicit bit
  int shift;                                             // bits to drop from the 24-bit mantissa
  uint32_t half_exponent;
  if (exponent >= -14) {
    shift = 13;
    half_exponent = static_cast<uint32_t>(exponent + 15);
  } else {
    if (exponent < -25) return sign;  // below half the smallest subnormal
    shift = 13 + (-14 - exponent);
    half_exponent = 0;
  }
  uint32_t result = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (result & 1))) ++result;
  // For normals `result` carries the implicit bit at position 10: adding the exponent
  // field (shifted) minus that bit lets a mantissa carry roll into the exponent.
  if (half_exponent != 0) return sign | static_cast<uint16_t>(((half_exponent - 1) << 10) + result);
  return sign | static_cast<uint16_t>(result);  // subnormal (a carry makes it the smallest normal)
}

void FloatsToFp16(const float* x, int64_t n, uint16_t* out) {
#if defined(__x86_64__)
  static const bool f16c = CpuFeatures().avx2;  // AVX2 + FMA + F16C
  if (f16c) {
    FloatsToFp16F16c(x, n, out);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToFp16(x[i]);
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7FFFFFFF) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace splitspec::kernels
