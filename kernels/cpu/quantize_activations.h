// Packing of float activations for MatMulRows: the private layout of
// PackedActivations::data, shared by the scalar reference and the ISA paths.
//
// Family of a weight type -> packed layout of each token (tokens one after another):
//   kFloat   (F32, F16, BF16):  float[cols], the activations unchanged.
//   kBlock32 (Q4_0, Q4_1, Q8_0): cols / 32 ActivationBlock32, int8 with one scale per 32.
//   kBlock256 (Q4_K, Q5_K, Q6_K): cols / 256 ActivationBlock256, int8 with one scale per 256.
// Quantization: d = amax / 127, q = round-half-even(x * (1 / d)) in [-127, 127]
// (d = 0 and q = 0 for an all-zero block). The vector packer produces the same bytes.
#ifndef SPLITSPEC_KERNELS_CPU_QUANTIZE_ACTIVATIONS_H_
#define SPLITSPEC_KERNELS_CPU_QUANTIZE_ACTIVATIONS_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

enum class ActivationFamily { kFloat, kBlock32, kBlock256 };

// REQUIRES: IsSupportedWeightType(weight_type).
ActivationFamily ActivationFamilyOf(GgmlType weight_type);

struct ActivationBlock32 {
  float d;        // scale: x ~= d * qs[i]
  float d_sum;    // d * sum(qs), exact product of the two as floats
  int32_t sum;    // sum(qs)
  int32_t pad;
  int8_t qs[32];
};
static_assert(sizeof(ActivationBlock32) == 48);

struct ActivationBlock256 {
  float d;             // scale: x ~= d * qs[i]
  int32_t pad[7];
  int16_t sums16[16];  // sums16[g] = sum(qs[16g .. 16g+16))
  int8_t qs[256];
};
static_assert(sizeof(ActivationBlock256) == 320);

// Bytes of one packed token of `cols` activations for weights of `weight_type`.
int64_t PackedTokenBytes(GgmlType weight_type, int64_t cols);

namespace internal {
// Quantize n floats (n % 32 == 0 / n % 256 == 0) into blocks; scalar and AVX2 versions
// produce identical bytes.
void QuantizeBlocks32Scalar(const float* x, int64_t n, ActivationBlock32* out);
void QuantizeBlocks256Scalar(const float* x, int64_t n, ActivationBlock256* out);
void QuantizeBlocks32Avx2(const float* x, int64_t n, ActivationBlock32* out);
void QuantizeBlocks256Avx2(const float* x, int64_t n, ActivationBlock256* out);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_QUANTIZE_ACTIVATIONS_H_
