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
// REQUIRES: IsSupportedWeightType(type), n % block_size == 0 (checked: aborts otherwise).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_DEQUANTIZE_H_
