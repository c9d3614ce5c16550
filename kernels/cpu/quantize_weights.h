// Scalar quantizers of float rows to ggml weight types: the inverse of
// DequantizeRow, used to build test matrices and small test models.
//
//   std::vector<uint8_t> row(RowBytes(GgmlType::kQ4_K, 512));
//   QuantizeRow(GgmlType::kQ4_K, values.data(), row.data(), 512);
//
// These are simple round-to-nearest quantizers (no error search as in llama.cpp's
// quantize tool): their bytes differ from llama.cpp's, but are valid blocks of the
// same layout, and the dequantized values are within one quantization step of the
// input. Thread-safe (pure function).
#ifndef SPLITSPEC_KERNELS_CPU_QUANTIZE_WEIGHTS_H_
#define SPLITSPEC_KERNELS_CPU_QUANTIZE_WEIGHTS_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

// dst: RowBytes(type, n) bytes <- src [n] floats.
// REQUIRES: IsSupportedWeightType(type) or Q5_0, n % block_size == 0, src finite (aborts otherwise
// on the first two).
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_QUANTIZE_WEIGHTS_H_
