#include "kernels/cpu/dequantize.h"

#include <cstdlib>
#include <cstring>

#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

void DequantizeF16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFloat(src[i]);
}

void DequantizeBf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

void DequantizeQ4_0(const BlockQ4_0* blocks, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, dst += kQk32) {
    const float d = Fp16ToFloat(blocks[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((blocks[b].qs[j] & 0xF) - 8);
      dst[j + 16] = d * static_cast<float>((blocks[b].qs[j] >> 4) - 8);
    }
  }
}

void DequantizeQ5_0(const BlockQ5_0* blocks, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, dst += kQk32) {
    const float d = Fp16ToFloat(blocks[b].d);
    const uint32_t qh = blocks[b].qh[0] | blocks[b].qh[1] << 8 | blocks[b].qh[2] << 16 |
                        static_cast<uint32_t>(blocks[b].qh[3]) << 24;
    for (int j = 0; j < 16; ++j) {
      const int lo = (blocks[b].qs[j] & 0xF) + (((qh >> j) & 1) ? 16 : 0);
      const int hi = (blocks[b].qs[j] >> 4) + (((qh >> (16 + j)) & 1) ? 16 : 0);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

void DequantizeQ4_1(const BlockQ4_1* blocks, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, dst += kQk32) {
    const float d = Fp16ToFloat(blocks[b].d);
    const float m = Fp16ToFloat(blocks[b].m);
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(blocks[b].qs[j] & 0xF) + m;
      dst[j + 16] = d * static_cast<float>(blocks[b].qs[j] >> 4) + m;
    }
  }
}

void DequantizeQ8_0(const BlockQ8_0* blocks, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, dst += kQk32) {
    const float d = Fp16ToFloat(blocks[b].d);
    for (int j = 0; j < kQk32; ++j) dst[j] = d * static_cast<float>(blocks[b].qs[j]);
  }
}

// Q4_K and Q5_K share everything but the fifth bit; qh == nullptr means Q4_K.
void DequantizeSuperBlockK4(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs,
                            const uint8_t* qh, float* dst) {
  const float d = Fp16ToFloat(d16);
  const float dmin = Fp16ToFloat(dmin16);
  for (int sub = 0; sub < 8; ++sub) {
    uint8_t scale, min;
    UnpackScaleMinK4(scales, sub, &scale, &min);
    const float step = d * scale;
    const float offset = dmin * min;
    const uint8_t* q = qs + 32 * (sub / 2);
    const int shift = (sub % 2) * 4;
    for (int l = 0; l < 32; ++l) {
      int value = (q[l] >> shift) & 0xF;
      if (qh != nullptr) value |= ((qh[l] >> sub) & 1) << 4;
      dst[32 * sub + l] = step * static_cast<float>(value) - offset;
    }
  }
}

void DequantizeQ6_K(const BlockQ6_K* blocks, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, dst += kQkK) {
    const BlockQ6_K& block = blocks[b];
    const float d = Fp16ToFloat(block.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = block.ql + 64 * half;
      const uint8_t* qh = block.qh + 32 * half;
      float* out = dst + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            (ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4, (ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4,
            (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4, (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4};
        for (int k = 0; k < 4; ++k) {
          const int e = 128 * half + 32 * k + l;
          out[32 * k + l] =
              d * static_cast<float>(block.scales[e / 16]) * static_cast<float>(q[k] - 32);
        }
      }
    }
  }
}

}  // namespace

bool IsSupportedWeightType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  if (!(IsSupportedWeightType(type) || type == GgmlType::kQ5_0) || n < 0 ||
      n % GetGgmlTypeTraits(type).block_size != 0) {
    std::abort();  // programmer error: see REQUIRES
  }
  const int64_t blocks = n / GetGgmlTypeTraits(type).block_size;
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16:
      return DequantizeF16(static_cast<const uint16_t*>(src), dst, n);
    case GgmlType::kBF16:
      return DequantizeBf16(static_cast<const uint16_t*>(src), dst, n);
    case GgmlType::kQ4_0:
      return DequantizeQ4_0(static_cast<const BlockQ4_0*>(src), dst, blocks);
    case GgmlType::kQ4_1:
      return DequantizeQ4_1(static_cast<const BlockQ4_1*>(src), dst, blocks);
    case GgmlType::kQ5_0:
      return DequantizeQ5_0(static_cast<const BlockQ5_0*>(src), dst, blocks);
    case GgmlType::kQ8_0:
      return DequantizeQ8_0(static_cast<const BlockQ8_0*>(src), dst, blocks);
    case GgmlType::kQ4_K: {
      const auto* b = static_cast<const BlockQ4_K*>(src);
      for (int64_t i = 0; i < blocks; ++i) {
        DequantizeSuperBlockK4(b[i].d, b[i].dmin, b[i].scales, b[i].qs, nullptr, dst + i * kQkK);
      }
      return;
    }
    case GgmlType::kQ5_K: {
      const auto* b = static_cast<const BlockQ5_K*>(src);
      for (int64_t i = 0; i < blocks; ++i) {
        DequantizeSuperBlockK4(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh, dst + i * kQkK);
      }
      return;
    }
    case GgmlType::kQ6_K:
      return DequantizeQ6_K(static_cast<const BlockQ6_K*>(src), dst, blocks);
    default:
      std::abort();
  }
}

void WidenQ5_0ToQ8_0(const void* q5_0_blocks, void* q8_0_blocks, int64_t blocks) {
  const auto* src = static_cast<const BlockQ5_0*>(q5_0_blocks);
  auto* dst = static_cast<BlockQ8_0*>(q8_0_blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t qh;
    std::memcpy(&qh, src[b].qh, sizeof(qh));
    dst[b].d = src[b].d;
    for (int j = 0; j < 16; ++j) {
      const int low = (src[b].qs[j] & 0xF) | static_cast<int>((qh >> j) & 1) << 4;
      const int high = (src[b].qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
      dst[b].qs[j] = static_cast<int8_t>(low - 16);
      dst[b].qs[j + 16] = static_cast<int8_t>(high - 16);
    }
  }
}

}  // namespace splitspec::kernels
