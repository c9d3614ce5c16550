#include "kernels/cpu/quantize_weights.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

int RoundClamp(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

float Reciprocal(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

void QuantizeQ4_0(const float* x, BlockQ4_0* block) {
  float amax = 0.0f, max = 0.0f;  // `max`: the signed value of largest magnitude
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  }
  block->d = FloatToFp16(max / -8.0f);
  const float id = Reciprocal(Fp16ToFloat(block->d));
  for (int j = 0; j < 16; ++j) {
    const int lo = RoundClamp(x[j] * id + 8.0f, 0, 15);
    const int hi = RoundClamp(x[j + 16] * id + 8.0f, 0, 15);
    block->qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void QuantizeQ5_0(const float* x, BlockQ5_0* block) {
  float amax = 0.0f, max = 0.0f;  // `max`: the signed value of largest magnitude
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  }
  block->d = FloatToFp16(max / -16.0f);
  const float id = Reciprocal(Fp16ToFloat(block->d));
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = RoundClamp(x[j] * id + 16.0f, 0, 31);
    const int hi = RoundClamp(x[j + 16] * id + 16.0f, 0, 31);
    block->qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + 16);
  }
  std::memcpy(block->qh, &qh, sizeof(qh));
}

void QuantizeQ4_1(const float* x, BlockQ4_1* block) {
  const float min = *std::min_element(x, x + 32);
  const float max = *std::max_element(x, x + 32);
  block->d = FloatToFp16((max - min) / 15.0f);
  block->m = FloatToFp16(min);
  const float id = Reciprocal(Fp16ToFloat(block->d));
  const float m = Fp16ToFloat(block->m);
  for (int j = 0; j < 16; ++j) {
    const int lo = RoundClamp((x[j] - m) * id, 0, 15);
    const int hi = RoundClamp((x[j + 16] - m) * id, 0, 15);
    block->qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void QuantizeQ8_0(const float* x, BlockQ8_0* block) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  block->d = FloatToFp16(amax / 127.0f);
  const float id = Reciprocal(Fp16ToFloat(block->d));
  for (int i = 0; i < 32; ++i) block->qs[i] = static_cast<int8_t>(RoundClamp(x[i] * id, -127, 127));
}

// Inverse of UnpackScaleMinK4 for 8 (scale, min) pairs of 6 bits.
void PackScaleMinK4(const uint8_t* scale, const uint8_t* min, uint8_t* packed) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      packed[j] |= scale[j];
      packed[j + 4] |= min[j];
    } else {
      packed[j + 4] = static_cast<uint8_t>((scale[j] & 0xF) | ((min[j] & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((scale[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((min[j] >> 4) << 6);
    }
  }
}

// Q4_K (max_q = 15) and Q5_K (max_q = 31): x = d * scale_s * q - dmin * min_s per sub-block.
// Writes d, dmin, the packed scales and the quants q[256] (unpacked).
void QuantizeSuperBlockK(const float* x, int max_q, uint16_t* d16, uint16_t* dmin16,
                         uint8_t* packed_scales, uint8_t* q) {
  float step[8], offset[8];  // float scale and (non-negative) min of each sub-block
  float max_step = 0.0f, max_offset = 0.0f;
  for (int s = 0; s < 8; ++s) {
    const float lo = std::min(0.0f, *std::min_element(x + 32 * s, x + 32 * s + 32));
    const float hi = *std::max_element(x + 32 * s, x + 32 * s + 32);
    step[s] = (hi - lo) / static_cast<float>(max_q);
    offset[s] = -lo;
    max_step = std::max(max_step, step[s]);
    max_offset = std::max(max_offset, offset[s]);
  }
  *d16 = FloatToFp16(max_step / 63.0f);
  *dmin16 = FloatToFp16(max_offset / 63.0f);
  const float d = Fp16ToFloat(*d16), dmin = Fp16ToFloat(*dmin16);
  uint8_t scale[8], min[8];
  for (int s = 0; s < 8; ++s) {
    scale[s] = static_cast<uint8_t>(RoundClamp(step[s] * Reciprocal(d), 0, 63));
    min[s] = static_cast<uint8_t>(RoundClamp(offset[s] * Reciprocal(dmin), 0, 63));
    const float id = Reciprocal(d * scale[s]);
    const float m = dmin * min[s];
    for (int l = 0; l < 32; ++l)
      q[32 * s + l] = static_cast<uint8_t>(RoundClamp((x[32 * s + l] + m) * id, 0, max_q));
  }
  PackScaleMinK4(scale, min, packed_scales);
}

// Sub-block s's 4 low bits go to the low (even s) or high (odd s) nibbles of qs[32 (s/2) ..].
void PackLowNibblesK(const uint8_t* q, uint8_t* qs) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] =
          static_cast<uint8_t>((q[64 * c + l] & 0xF) | ((q[64 * c + 32 + l] & 0xF) << 4));
    }
  }
}

void QuantizeQ6_K(const float* x, BlockQ6_K* block) {
  float step[16], max_step = 0.0f;
  for (int g = 0; g < 16; ++g) {
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * g + i]));
    step[g] = amax / 31.0f;
    max_step = std::max(max_step, step[g]);
  }
  block->d = FloatToFp16(max_step / 127.0f);
  const float d = Fp16ToFloat(block->d);
  uint8_t q[256];
  for (int g = 0; g < 16; ++g) {
    block->scales[g] = static_cast<int8_t>(RoundClamp(step[g] * Reciprocal(d), -127, 127));
    const float id = Reciprocal(d * block->scales[g]);
    for (int i = 0; i < 16; ++i)
      q[16 * g + i] = static_cast<uint8_t>(RoundClamp(x[16 * g + i] * id + 32.0f, 0, 63));
  }
  for (int half = 0; half < 2; ++half) {
    const uint8_t* qq = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      block->ql[64 * half + l] = static_cast<uint8_t>((qq[l] & 0xF) | ((qq[l + 64] & 0xF) << 4));
      block->ql[64 * half + 32 + l] =
          static_cast<uint8_t>((qq[l + 32] & 0xF) | ((qq[l + 96] & 0xF) << 4));
      block->qh[32 * half + l] =
          static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                               ((qq[l + 96] >> 4) << 6));
    }
  }
}

void QuantizeQ4_K(const float* x, BlockQ4_K* block) {
  uint8_t q[256];
  QuantizeSuperBlockK(x, 15, &block->d, &block->dmin, block->scales, q);
  PackLowNibblesK(q, block->qs);
}

void QuantizeQ5_K(const float* x, BlockQ5_K* block) {
  uint8_t q[256];
  QuantizeSuperBlockK(x, 31, &block->d, &block->dmin, block->scales, q);
  PackLowNibblesK(q, block->qs);
  for (int l = 0; l < 32; ++l) {
    uint8_t bits = 0;
    for (int s = 0; s < 8; ++s) bits |= static_cast<uint8_t>(((q[32 * s + l] >> 4) & 1) << s);
    block->qh[l] = bits;
  }
}

}  // namespace

void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n) {
  if (!(IsSupportedWeightType(type) || type == GgmlType::kQ5_0) || n < 0 ||
      n % GetGgmlTypeTraits(type).block_size != 0) {
    std::abort();  // programmer error: see REQUIRES
  }
  const int64_t blocks = n / GetGgmlTypeTraits(type).block_size;
  for (int64_t b = 0; b < blocks; ++b) {
    switch (type) {
      case GgmlType::kF32:
        static_cast<float*>(dst)[b] = src[b];
        break;
      case GgmlType::kF16:
        static_cast<uint16_t*>(dst)[b] = FloatToFp16(src[b]);
        break;
      case GgmlType::kBF16:
        static_cast<uint16_t*>(dst)[b] = FloatToBf16(src[b]);
        break;
      case GgmlType::kQ4_0:
        QuantizeQ4_0(src + 32 * b, static_cast<BlockQ4_0*>(dst) + b);
        break;
      case GgmlType::kQ4_1:
        QuantizeQ4_1(src + 32 * b, static_cast<BlockQ4_1*>(dst) + b);
        break;
      case GgmlType::kQ5_0:
        QuantizeQ5_0(src + 32 * b, static_cast<BlockQ5_0*>(dst) + b);
        break;
      case GgmlType::kQ8_0:
        QuantizeQ8_0(src + 32 * b, static_cast<BlockQ8_0*>(dst) + b);
        break;
      case GgmlType::kQ4_K:
        QuantizeQ4_K(src + 256 * b, static_cast<BlockQ4_K*>(dst) + b);
        break;
      case GgmlType::kQ5_K:
        QuantizeQ5_K(src + 256 * b, static_cast<BlockQ5_K*>(dst) + b);
        break;
      case GgmlType::kQ6_K:
        QuantizeQ6_K(src + 256 * b, static_cast<BlockQ6_K*>(dst) + b);
        break;
      default:
        std::abort();
    }
  }
}

}  // namespace splitspec::kernels
