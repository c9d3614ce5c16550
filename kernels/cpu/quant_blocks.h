// Byte layouts of ggml's quantized blocks, and half-precision conversions.
//
// Internal to the quantized-tensor kernels (dequantize, quantize_weights, matmul):
// the structs mirror ggml's on-disk blocks byte for byte, so a row read from a
// memory-mapped GGUF file can be cast to `const BlockQ4_1*` directly.
//
//   const auto* blocks = static_cast<const BlockQ4_1*>(row);
//   float d = Fp16ToFloat(blocks[0].d);
//
// K-quants use 256-element super-blocks (kQkK). Q4_K and Q5_K split one into 8
// sub-blocks of 32 whose 6-bit scales and mins are packed into 12 bytes (see
// UnpackScaleMinK4); Q6_K uses 16 sub-blocks of 16 with signed 8-bit scales.
#ifndef SPLITSPEC_KERNELS_CPU_QUANT_BLOCKS_H_
#define SPLITSPEC_KERNELS_CPU_QUANT_BLOCKS_H_

#include <cstdint>
#include <cstring>

namespace splitspec::kernels {

inline constexpr int kQk32 = 32;  // elements per block of Q4_0, Q4_1, Q8_0
inline constexpr int kQkK = 256;  // elements per super-block of the K-quants

// x[j] = d * ((qs[j] & 0xF) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8), j in [0, 16).
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[16];
};
// x[j] = d * (qs[j] & 0xF) + m, x[j + 16] = d * (qs[j] >> 4) + m.
struct BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 offset
  uint8_t qs[16];
};
// x[j] = d * qs[j].
// x[j] = d * (q_j - 16) with the 5-bit q_j = (qs[j] & 0xF) | bit j of qh << 4 and
// q_{j+16} = (qs[j] >> 4) | bit (j + 16) of qh << 4, for j < 16 (qh little-endian).
struct BlockQ5_0 {
  uint16_t d;  // fp16 scale
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[32];
};
// Sub-block s (32 elements) of chunk c = s / 2: low nibbles of qs[32c .. 32c+32) for even s,
// high nibbles for odd s. x = d * sc[s] * q - dmin * m[s].
struct BlockQ4_K {
  uint16_t d;          // fp16 scale of the sub-block scales
  uint16_t dmin;       // fp16 scale of the sub-block mins
  uint8_t scales[12];  // 8 x (6-bit scale, 6-bit min)
  uint8_t qs[128];     // 4-bit quants
};
// As Q4_K, plus a fifth bit: bit s of qh[l] is the high bit of element l of sub-block s.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];   // high bits
  uint8_t qs[128];  // low 4 bits
};
// Half h (128 elements) uses ql[64h .. 64h+64), qh[32h .. 32h+32). For l in [0, 32):
//   element 128h + l      = (ql[64h + l] & 0xF)      | ((qh[32h + l] >> 0) & 3) << 4
//   element 128h + 32 + l = (ql[64h + 32 + l] & 0xF) | ((qh[32h + l] >> 2) & 3) << 4
//   element 128h + 64 + l = (ql[64h + l] >> 4)       | ((qh[32h + l] >> 4) & 3) << 4
//   element 128h + 96 + l = (ql[64h + 32 + l] >> 4)  | ((qh[32h + l] >> 6) & 3) << 4
// and x[e] = d * scales[e / 16] * (q[e] - 32).
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// 6-bit scale and min of sub-block j in [0, 8) from the 12 packed bytes of Q4_K / Q5_K:
// j < 4: low 6 bits of bytes j (scale) and j + 4 (min);
// j >= 4: low / high nibble of byte j + 4, with the top 2 bits of bytes j - 4 / j on top.
inline void UnpackScaleMinK4(const uint8_t* packed, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// All 8 scales and 8 mins of a Q4_K / Q5_K super-block at once, byte j of *scales / *mins
// being sub-block j's (the same values as UnpackScaleMinK4, with 32-bit word operations).
inline void UnpackScalesMinsK4(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  uint32_t a, b, c;  // bytes 0-3, 4-7, 8-11
  std::memcpy(&a, packed, 4);
  std::memcpy(&b, packed + 4, 4);
  std::memcpy(&c, packed + 8, 4);
  const uint32_t scales_hi = (c & 0x0F0F0F0Fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t mins_hi = ((c >> 4) & 0x0F0F0F0Fu) | (((b >> 6) & 0x03030303u) << 4);
  *scales = (a & 0x3F3F3F3Fu) | (static_cast<uint64_t>(scales_hi) << 32);
  *mins = (b & 0x3F3F3F3Fu) | (static_cast<uint64_t>(mins_hi) << 32);
}

// Exact IEEE half -> float (subnormals, infinities and NaN included).
inline float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int shift = 0;
    while ((mantissa & 0x400) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mantissa & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Float -> half, round to nearest even; overflow gives infinity.
uint16_t FloatToFp16(float f);

// out[i] = FloatToFp16(x[i]) for i < n, bit for bit for every non-NaN x[i] (a NaN gives a
// quiet NaN, its payload's bits may differ); F16C's vcvtps2ph where the CPU has it
// (CpuFeatures().avx2), 8 values an instruction: the KV cache's writes, per token per
// layer. Thread-safe.
void FloatsToFp16(const float* x, int64_t n, uint16_t* out);

// f rounded to the nearest half-precision value (ties to even), as a float.
inline float RoundToHalf(float f) { return Fp16ToFloat(FloatToFp16(f)); }

inline float Bf16ToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Float -> bfloat16, round to nearest even (NaN stays NaN).
uint16_t FloatToBf16(float f);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_QUANT_BLOCKS_H_
