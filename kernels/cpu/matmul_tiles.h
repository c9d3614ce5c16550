// Internal to the matmul ISA files: the row/token loop shared by every path.
//
// For each row, tokens are processed in tiles of at most Kernel::kTile; a tile
// kernel reads the weight row once and keeps one accumulator set per token, so
// each output's arithmetic is the same whatever tile it lands in (batch invariance).
#ifndef SPLITSPEC_KERNELS_CPU_MATMUL_TILES_H_
#define SPLITSPEC_KERNELS_CPU_MATMUL_TILES_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {

inline constexpr int kMaxTokenTile = 9;

// The tokens of one tile: packed activations of token i at x[i], its outputs at y[i]
// (y[i][r] is the output of row r).
struct TokenTile {
  int count = 0;
  const uint8_t* x[kMaxTokenTile];
  float* y[kMaxTokenTile];
};

// kernel.template Run<tile.count>(row, r, tile), for tile.count in [1, N].
template <class Kernel, int N>
inline void RunTile(const Kernel& kernel, const uint8_t* row, int64_t r, const TokenTile& tile) {
  if constexpr (N > 1) {
    if (tile.count < N) return RunTile<Kernel, N - 1>(kernel, row, r, tile);
  }
  kernel.template Run<N>(row, r, tile);
}

// Calls kernel.template Run<N>(row_pointer, r, tile) for every row r in
// [row_begin, row_end) and every tile of N <= Kernel::kTile (<= kMaxTokenTile) tokens.
// Each weight row is read once per tile; consecutive tiles of the same row hit it in L1.
// `Kernel` lives in an anonymous namespace of its ISA file, so each file gets its own
// instantiation.
template <class Kernel>
void ForEachRowAndTile(const Kernel& kernel, GgmlType weight_type, const void* w, int64_t cols,
                       const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                       int64_t y_stride) {
  constexpr int kTile = Kernel::kTile;
  static_assert(kTile >= 1 && kTile <= kMaxTokenTile);
  const size_t row_bytes = RowBytes(weight_type, cols);
  const int64_t token_bytes = PackedTokenBytes(weight_type, cols);
  const int64_t num_tiles = (x.tokens + kTile - 1) / kTile;
  for (int64_t tile_begin = 0; tile_begin < num_tiles; tile_begin += 4) {
    TokenTile tiles[4];
    const int64_t tile_end = num_tiles - tile_begin < 4 ? num_tiles : tile_begin + 4;
    for (int64_t k = tile_begin; k < tile_end; ++k) {
      TokenTile& tile = tiles[k - tile_begin];
      const int64_t t0 = k * kTile;
      tile.count = static_cast<int>(x.tokens - t0 < kTile ? x.tokens - t0 : kTile);
      for (int i = 0; i < tile.count; ++i) {
        tile.x[i] = x.data.data() + (t0 + i) * token_bytes;
        tile.y[i] = y + (t0 + i) * y_stride;
      }
    }
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* row = static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * row_bytes;
      for (int64_t k = 0; k < tile_end - tile_begin; ++k) {
        RunTile<Kernel, kTile>(kernel, row, r, tiles[k]);
      }
    }
  }
}

// K-quant (Q4_K, Q5_K, Q6_K) halves of the AVX2, AVX-512 and AVX-512 VNNI paths, in their
// own files; same contract as MatMulRows. The VNNI one gives bitwise the same outputs.
void MatMulRowsKQuantsAvx2(GgmlType weight_type, const void* w, int64_t cols,
                           const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                           int64_t y_stride);
void MatMulRowsKQuantsAvx512(GgmlType weight_type, const void* w, int64_t cols,
                             const PackedActivations& x, int64_t row_begin, int64_t row_end,
                             float* y, int64_t y_stride);
void MatMulRowsKQuantsAvx512Vnni(GgmlType weight_type, const void* w, int64_t cols,
                                 const PackedActivations& x, int64_t row_begin, int64_t row_end,
                                 float* y, int64_t y_stride);

// Kernels on interleaved rows (matmul.h, "Interleaved rows"): one 16-row group (`group`,
// nb blocks of GroupBlockBytes(type) each) times every token of x, in the type's order;
// writes y[t * y_stride + i] for rows i < rows_valid of the group (y points at its first
// row). Q4_1 and Q8_0, per ISA.
// Block b of a group: Q4_1 at b * 320: 4 x 64 nibble bytes, d[16], m[16]; Q8_0 at
// b * 544: 8 x 64 biased quants, d[16]. (Keeping Q8_0's d beside its quants measured
// faster than moving all the d's behind the group to keep the chunks 64-byte aligned:
// 0.6 vs 0.95 ms for the 49152 x 576 head, one token.)
inline constexpr int64_t kQ4_1GroupBlockBytes = 320;
inline constexpr int64_t kQ8_0GroupBlockBytes = 544;
constexpr int64_t GroupBlockBytes(GgmlType type) {
  return type == GgmlType::kQ4_1 ? kQ4_1GroupBlockBytes : kQ8_0GroupBlockBytes;
}
inline const uint8_t* GroupQuants(GgmlType type, const uint8_t* group, int64_t b) {
  return group + b * GroupBlockBytes(type);
}
// The block's d[16] (fp16), followed for Q4_1 by m[16].
inline const uint8_t* GroupScales(GgmlType type, const uint8_t* group, int64_t b) {
  return group + b * GroupBlockBytes(type) + (type == GgmlType::kQ4_1 ? 256 : 512);
}
// The group kernels prefetch the weights this many bytes ahead of the block they read
// (the interleaved matrix is one sequential stream per thread; past its end a prefetch
// is harmless). The hardware prefetchers alone left the cores waiting on memory, all
// the more when the tokens' compute between two blocks' loads grows: measured on the
// 2-core Xeon with AMX (splitspec bench verify --prompt-tokens 256 --threads 2, whole-model
// forward, without / with, three alternating runs) 5.60 / 4.67 ms at 1 token, 7.67 / 5.69
// at 3, 9.42 / 6.89 at 5, 11.9 / 9.2 at 8; the AVX2 path 6.6 / 5.3 ms at 1 token, 19.7 /
// 16.9 at 8. 2-16 KiB measured within the noise of each other, 1 KiB less.
inline constexpr int64_t kWeightPrefetchBytes = 4096;

// Prefetches the cache lines of block b's weights kWeightPrefetchBytes ahead.
template <GgmlType kType>
inline void PrefetchAhead(const uint8_t* group, int64_t b) {
  const uint8_t* ahead = group + b * GroupBlockBytes(kType) + kWeightPrefetchBytes;
  constexpr int kLines = static_cast<int>((GroupBlockBytes(kType) + 63) / 64);
#pragma GCC unroll 9
  for (int l = 0; l < kLines; ++l) __builtin_prefetch(ahead + 64 * l, /*rw=*/0, /*locality=*/3);
}

using GroupFn = void (*)(const uint8_t* group, int64_t nb, const PackedActivations& x,
                         int rows_valid, float* y, int64_t y_stride);
#define SPLITSPEC_DECLARE_GROUP_KERNEL(name)                                              \
  void name(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid, \
            float* y, int64_t y_stride)
SPLITSPEC_DECLARE_GROUP_KERNEL(Q4_1GroupScalar);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q4_1GroupAvx2);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q4_1GroupAvx512);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q4_1GroupAvx512Vnni);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q8_0GroupScalar);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q8_0GroupAvx2);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q8_0GroupAvx512);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q8_0GroupAvx512Vnni);
// AMX tile multiplies with the AVX-512 VNNI epilogue (matmul_interleaved_amx.cc): bitwise
// the VNNI kernels' outputs. REQUIRES: CpuFeatures().amx_int8 (the OS granted the tiles).
SPLITSPEC_DECLARE_GROUP_KERNEL(Q4_1GroupAmx);
SPLITSPEC_DECLARE_GROUP_KERNEL(Q8_0GroupAmx);
#undef SPLITSPEC_DECLARE_GROUP_KERNEL

// The tokens of one tile of a group kernel: each token's packed quants, block scales,
// d_sum and quant sums (Blocks32View), and its outputs (y[i] points at the group's
// first row for token i). The vector kernels take up to 10 tokens a tile (their
// accumulators and the block's weights fill the registers), the AMX kernels 16 (the
// rows of a tile).
inline constexpr int kMaxVectorTileTokens = 10;
inline constexpr int kAmxMaxTileTokens = 16;
inline constexpr int kMaxGroupTileTokens = kAmxMaxTileTokens;  // the larger of the two
// MatMulRowsInterleaved runs calls of at least this many tokens on the AMX kernels
// (matmul.h, InterleavedAmxMinTokens; measured there).
inline constexpr int kAmxMinTokens = 16;
struct GroupTokenTile {
  int count = 0;
  const int8_t* qs[kMaxGroupTileTokens];
  const float* d[kMaxGroupTileTokens];
  const float* d_sum[kMaxGroupTileTokens];
  const float* sum[kMaxGroupTileTokens];
  float* y[kMaxGroupTileTokens];
};

// The tile of tokens [t0, t0 + count) of x (count <= kMaxGroupTileTokens), outputs at
// y + t * y_stride.
inline GroupTokenTile TokenTileAt(GgmlType weight_type, const PackedActivations& x, int64_t t0,
                                  int count, float* y, int64_t y_stride) {
  const int64_t token_bytes = PackedTokenBytes(weight_type, x.cols);
  GroupTokenTile tile;
  tile.count = count;
  for (int i = 0; i < count; ++i) {
    const Blocks32View v = ViewBlocks32(x.data.data() + (t0 + i) * token_bytes, x.cols);
    tile.qs[i] = v.qs;
    tile.d[i] = v.d;
    tile.d_sum[i] = v.d_sum;
    tile.sum[i] = v.sum;
    tile.y[i] = y + (t0 + i) * y_stride;
  }
  return tile;
}

// fn(tile) for the tokens of x in tiles of at most max_tokens (<= kMaxGroupTileTokens),
// of balanced sizes (they differ by at most one), outputs at y + t * y_stride.
template <class Fn>
void ForEachBalancedTile(GgmlType weight_type, const PackedActivations& x, int max_tokens, float* y,
                         int64_t y_stride, Fn&& fn) {
  const int64_t num_tiles = (x.tokens + max_tokens - 1) / max_tokens;
  for (int64_t k = 0; k < num_tiles; ++k) {
    const int64_t t0 = x.tokens * k / num_tiles;
    fn(TokenTileAt(weight_type, x, t0, static_cast<int>(x.tokens * (k + 1) / num_tiles - t0), y,
                   y_stride));
  }
}

// Raw rows [row_begin, row_end) of a Q4_1 or Q8_0 matrix: each run of up to 16 rows is
// interleaved into a per-thread scratch and handed to `group_fn` (the same outputs as on
// an interleaved copy).
void RowsByGroups(GgmlType weight_type, GroupFn group_fn, const void* w, int64_t cols,
                  const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                  int64_t y_stride);

}  // namespace splitspec::kernels::internal

#endif  // SPLITSPEC_KERNELS_CPU_MATMUL_TILES_H_
