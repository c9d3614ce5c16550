// Scalar dequantization of ggml tensor rows to floats: the reference every fast
// path is checked against, and the way to read a quantized row (e.g. one
// embedding row) without a matmul.
//
//   std::vector<float> row(576);
//   DequantizeRow(GgmlType::kQ8_0, embedding + token * RowBytes(GgmlType::kQ8_0, 576),
//                 row.data(), 576);
//
// Thread-safe (pure function).
#ifndef SPLITSPEC_KERNELS_CPU_DEQUANTIZE_H_
#define SPLITSPEC_KERNELS_CPU_DEQUANTIZE_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

// True for the weight types DequantizeRow and MatMulRows accept: F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K.
bool IsSupportedWeightType(GgmlType type);

// Scalar dequantization reference: dst[n] from n elements of `type` at src
// (RowBytes(type, n) bytes, ggml's block layout, no alignment needed).
// Also reads Q5_0, a file type only (WidenQ5_0ToQ8_0).
// REQUIRES: IsSupportedWeightType(type) or Q5_0, n % block_size == 0 (checked: aborts
// otherwise).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// Rewrites `blocks` Q5_0 blocks as Q8_0 blocks of exactly the same values: the same
// fp16 scale d, and quants q - 16 in [-16, 15] (int8 holds them). Q5_0 has no matmul
// kernels of its own; a Q5_0 tensor (llama.cpp's Q4_K_M writes some when a row is not a
// multiple of 256) is widened once at load and then runs on the Q8_0 kernels, whose
// integer block dot is llama.cpp's Q5_0 x Q8_0 dot (sum of (q - 16) * x times d * d_x).
// Costs 34 instead of 22 bytes per 32 weights.
void WidenQ5_0ToQ8_0(const void* q5_0_blocks, void* q8_0_blocks, int64_t blocks);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_DEQUANTIZE_H_
