#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {

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

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7FFFFFFF) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace splitspec::kernels
