// Packing of float activations for MatMulRows: the private layout of
// PackedActivations::data, shared by the scalar reference and the ISA paths.
//
// Family of a weight type -> packed layout of one token (tokens follow each other,
// PackedTokenBytes apart):
//   kFloat    (F32, F16, BF16):  float[cols], the activations unchanged.
//   kBlock32  (Q4_0, Q4_1, Q8_0): int8 blocks of 32 with one scale each, as arrays
//             (see Blocks32View) so that vector code loads 16 scales at once.
//   kBlock256 (Q4_K, Q5_K, Q6_K): cols / 256 ActivationBlock256, one scale per 256.
// Quantization of a span: d = amax / 127, q = round-half-even(x * (127 / amax)) clamped
// to [-127, 127] (d = 0 and q = 0 for an all-zero span). The kBlock32 family stores d and
// d * sum(q) rounded to half precision (as floats), exactly as llama.cpp's Q8_0 / Q8_1
// activation blocks hold them, so that products with Q4_0 / Q4_1 / Q8_0 weights see the
// same numbers in both engines; kBlock256 keeps d in float (llama.cpp's Q8_K differs in
// its rounding anyway). The AVX2 packer performs the same float operations and writes
// identical bytes.
#ifndef SPLITSPEC_KERNELS_CPU_QUANTIZE_ACTIVATIONS_H_
#define SPLITSPEC_KERNELS_CPU_QUANTIZE_ACTIVATIONS_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

enum class ActivationFamily { kFloat, kBlock32, kBlock256 };

// REQUIRES: IsSupportedWeightType(weight_type).
ActivationFamily ActivationFamilyOf(GgmlType weight_type);

// One packed token of the kBlock32 family: nb = cols / 32 blocks; the per-block arrays
// hold Blocks32Padded(nb) entries (multiple of 16), the padding is zero.
struct Blocks32View {
  int8_t* qs;    // [nb, 32] quants: x[32b + i] ~= d[b] * qs[32b + i]
  float* d;      // [nb] scales (half-precision values)
  float* d_sum;  // [nb] half(unrounded d * sum[b])
  float* sum;    // [nb] sum of the block's quants (an exact integer)
};
inline int64_t Blocks32Padded(int64_t nb) { return (nb + 15) / 16 * 16; }
// The view of a packed token at `token`; readers of a const buffer must only read.
// Inline: the group kernels take a view per token per 16-row group.
inline Blocks32View ViewBlocks32(const uint8_t* token, int64_t cols) {
  uint8_t* base = const_cast<uint8_t*>(token);
  const int64_t padded = Blocks32Padded(cols / 32);
  float* d = reinterpret_cast<float*>(base + cols);  // cols % 32 == 0: 4-byte aligned
  return Blocks32View{reinterpret_cast<int8_t*>(base), d, d + padded, d + 2 * padded};
}

struct ActivationBlock256 {
  float d;  // scale: x ~= d * qs[i]
  int32_t pad[7];
  int16_t sums16[16];  // sums16[g] = sum(qs[16g .. 16g+16))
  int8_t qs[256];
};
static_assert(sizeof(ActivationBlock256) == 320);

// Bytes of one packed token of `cols` activations for weights of `weight_type`
// (a multiple of 64).
int64_t PackedTokenBytes(GgmlType weight_type, int64_t cols);

namespace internal {
// Quantize one token (cols % 32 == 0 / cols % 256 == 0). Scalar and AVX2 versions
// produce identical bytes.
void QuantizeBlocks32Scalar(const float* x, int64_t cols, Blocks32View out);
void QuantizeBlocks256Scalar(const float* x, int64_t cols, ActivationBlock256* out);
void QuantizeBlocks32Avx2(const float* x, int64_t cols, Blocks32View out);
void QuantizeBlocks256Avx2(const float* x, int64_t cols, ActivationBlock256* out);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_QUANTIZE_ACTIVATIONS_H_
