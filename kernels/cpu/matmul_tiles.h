// Internal to the matmul ISA files: the row/token loop shared by every path.
//
// For each row, tokens are processed in tiles of at most kMaxTokenTile; a tile
// kernel reads the weight row once and keeps one accumulator set per token, so
// each output's arithmetic is the same whatever tile it lands in (batch invariance).
#ifndef SPLITSPEC_KERNELS_CPU_MATMUL_TILES_H_
#define SPLITSPEC_KERNELS_CPU_MATMUL_TILES_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {

inline constexpr int kMaxTokenTile = 8;

// The tokens of one tile: packed activations of token i at x[i], its output at y[i].
struct TokenTile {
  int count = 0;
  const uint8_t* x[kMaxTokenTile];
  float* y[kMaxTokenTile];  // y[i] + r is the output of row r
};

// Calls kernel.template Run<N>(row_pointer, tile) for every row in [row_begin, row_end)
// and every tile of N <= kMaxTokenTile tokens. `Kernel` lives in an anonymous namespace
// of its ISA file, so each file gets its own instantiation.
template <class Kernel>
void ForEachRowAndTile(const Kernel& kernel, GgmlType weight_type, const void* w, int64_t cols,
                       const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                       int64_t y_stride) {
  const size_t row_bytes = RowBytes(weight_type, cols);
  const int64_t token_bytes = PackedTokenBytes(weight_type, cols);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * row_bytes;
    for (int64_t t0 = 0; t0 < x.tokens; t0 += kMaxTokenTile) {
      TokenTile tile;
      tile.count = static_cast<int>(x.tokens - t0 < kMaxTokenTile ? x.tokens - t0 : kMaxTokenTile);
      for (int i = 0; i < tile.count; ++i) {
        tile.x[i] = x.data.data() + (t0 + i) * token_bytes;
        tile.y[i] = y + (t0 + i) * y_stride + r;
      }
      switch (tile.count) {
        case 1: kernel.template Run<1>(row, tile); break;
        case 2: kernel.template Run<2>(row, tile); break;
        case 3: kernel.template Run<3>(row, tile); break;
        case 4: kernel.template Run<4>(row, tile); break;
        case 5: kernel.template Run<5>(row, tile); break;
        case 6: kernel.template Run<6>(row, tile); break;
        case 7: kernel.template Run<7>(row, tile); break;
        default: kernel.template Run<8>(row, tile); break;
      }
    }
  }
}

// K-quant (Q4_K, Q5_K, Q6_K) halves of the AVX2 and AVX-512 paths, in their own files;
// same contract as MatMulRows.
void MatMulRowsKQuantsAvx2(GgmlType weight_type, const void* w, int64_t cols,
                           const PackedActivations& x, int64_t row_begin, int64_t row_end,
                           float* y, int64_t y_stride);
void MatMulRowsKQuantsAvx512(GgmlType weight_type, const void* w, int64_t cols,
                             const PackedActivations& x, int64_t row_begin, int64_t row_end,
                             float* y, int64_t y_stride);

}  // namespace splitspec::kernels::internal

#endif  // SPLITSPEC_KERNELS_CPU_MATMUL_TILES_H_
