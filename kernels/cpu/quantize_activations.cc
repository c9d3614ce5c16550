#include "kernels/cpu/quantize_activations.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

// Quantizes n values (n <= 256) with one scale; returns the unrounded scale
// amax / 127. The reciprocal is 127 / amax (not 1 / d): ggml's x86 quantizers
// compute it so, and one ulp of difference in the reciprocal flips the rounding
// of values near a half step. The vector packers reproduce exactly these
// operations: amax, d = amax / 127, id = 127 / amax, q = rint(x * id).
float QuantizeSpan(const float* x, int n, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < n; ++i) {
    float v = std::nearbyint(x[i] * id);
    v = std::fmin(127.0f, std::fmax(-127.0f, v));
    q[i] = static_cast<int8_t>(v);
  }
  return d;
}

}  // namespace

ActivationFamily ActivationFamilyOf(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return ActivationFamily::kFloat;
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ8_0:
      return ActivationFamily::kBlock32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return ActivationFamily::kBlock256;
    default:
      std::abort();  // programmer error: REQUIRES IsSupportedWeightType
  }
}

int64_t PackedTokenBytes(GgmlType weight_type, int64_t cols) {
  int64_t bytes = 0;
  switch (ActivationFamilyOf(weight_type)) {
    case ActivationFamily::kFloat:
      bytes = cols * static_cast<int64_t>(sizeof(float));
      break;
    case ActivationFamily::kBlock32:
      bytes = cols + 3 * Blocks32Padded(cols / 32) * static_cast<int64_t>(sizeof(float));
      break;
    case ActivationFamily::kBlock256:
      bytes = cols / 256 * static_cast<int64_t>(sizeof(ActivationBlock256));
      break;
  }
  return (bytes + 63) / 64 * 64;
}

namespace internal {

void QuantizeBlocks32Scalar(const float* x, int64_t cols, Blocks32View out) {
  const int64_t nb = cols / 32;
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* q = out.qs + 32 * b;
    const float d = QuantizeSpan(x + 32 * b, 32, q);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += q[i];
    out.d[b] = RoundToHalf(d);
    out.sum[b] = static_cast<float>(sum);
    out.d_sum[b] = RoundToHalf(d * static_cast<float>(sum));
  }
  for (int64_t b = nb; b < Blocks32Padded(nb); ++b) out.d[b] = out.sum[b] = out.d_sum[b] = 0.0f;
}

void QuantizeBlocks256Scalar(const float* x, int64_t cols, ActivationBlock256* out) {
  for (int64_t b = 0; b < cols / 256; ++b) {
    ActivationBlock256& block = out[b];
    block.d = QuantizeSpan(x + 256 * b, 256, block.qs);
    std::memset(block.pad, 0, sizeof(block.pad));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
      block.sums16[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace internal

void SizeActivations(GgmlType weight_type, int64_t tokens, int64_t cols, PackedActivations* out) {
  const int block = GetGgmlTypeTraits(weight_type).block_size;
  if (tokens < 0 || cols < 0 || cols % block != 0) std::abort();  // programmer error
  const size_t bytes = static_cast<size_t>(tokens * PackedTokenBytes(weight_type, cols));
  if (out->data.size() < bytes) out->data.resize(bytes);
  out->weight_type = weight_type;
  out->tokens = tokens;
  out->cols = cols;
}

void PackActivationTokens(const float* x, int64_t token_begin, int64_t token_end,
                          PackedActivations* out) {
  const GgmlType weight_type = out->weight_type;
  const int64_t cols = out->cols;
  if (token_begin < 0 || token_end < token_begin || token_end > out->tokens) std::abort();
  const ActivationFamily family = ActivationFamilyOf(weight_type);
  const int64_t token_bytes = PackedTokenBytes(weight_type, cols);
  const bool avx2 = CpuFeatures().avx2;
  for (int64_t t = token_begin; t < token_end; ++t) {
    const float* row = x + t * cols;
    uint8_t* dst = out->data.data() + t * token_bytes;
    switch (family) {
      case ActivationFamily::kFloat: {
        // The packed row is padded to 64 bytes; the input row is not.
        const size_t row_bytes = static_cast<size_t>(cols) * sizeof(float);
        std::memcpy(dst, row, row_bytes);
        std::memset(dst + row_bytes, 0, static_cast<size_t>(token_bytes) - row_bytes);
        break;
      }
      case ActivationFamily::kBlock32: {
        const Blocks32View blocks = ViewBlocks32(dst, cols);
        avx2 ? internal::QuantizeBlocks32Avx2(row, cols, blocks)
             : internal::QuantizeBlocks32Scalar(row, cols, blocks);
        break;
      }
      case ActivationFamily::kBlock256: {
        auto* blocks = reinterpret_cast<ActivationBlock256*>(dst);
        avx2 ? internal::QuantizeBlocks256Avx2(row, cols, blocks)
             : internal::QuantizeBlocks256Scalar(row, cols, blocks);
        break;
      }
    }
  }
}

void PackActivations(GgmlType weight_type, const float* x, int64_t tokens, int64_t cols,
                     PackedActivations* out) {
  SizeActivations(weight_type, tokens, cols, out);
  PackActivationTokens(x, 0, tokens, out);
}

}  // namespace splitspec::kernels
