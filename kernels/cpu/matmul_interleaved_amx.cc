// AMX kernels on interleaved rows (matmul.h, "Interleaved rows", "Q4_1 order", "Q8_0
// order"): the integer block dots of a 16-row group with up to 16 tokens come from one
// tile multiply per block (TDPBSUD: signed activations x unsigned weights), and the
// block's scales are applied by the AVX-512 epilogue of the VNNI kernel, operation for
// operation, so the outputs are bitwise those of matmul_interleaved_avx512.cc.
//
// Why a tile multiply fits the layout as it is: per block, the interleaved group holds
// "elements 4j..4j+3 of every row" in 64-byte chunk j, which is exactly a B tile of
// 8 rows x 64 bytes in the VNNI order TMUL reads (B[k / 4][4 n + k % 4], n = weight
// row): Q8_0's eight chunks (biased by +128) are that tile as stored; Q4_1's four
// chunks become it once their nibbles are split (low nibbles -> rows 0..3, high
// nibbles -> rows 4..7, as the VNNI kernel splits them into registers). The A tile is
// the tile's tokens' 32 activation quants of the block, one token per row at the packed
// token stride. C[t][n] is then the exact integer the VNNI kernel's vpdpbusd chain
// yields for token t and row n (Q8_0: plus 128 times the token's block quant sum,
// removed in float exactly as there).
//
// Where the time goes: a 16 x 16 x 32 tile multiply replaces 8 vpdpbusd per token, but
// the block's scales cannot enter a tile multiply, so every block also costs a tile store
// of C (as long as the multiply itself, ~4.4 ns on the 2-core Xeon measured) and the
// per-token epilogue (convert, scale, one or two FMAs). The gain therefore grows with the
// tile's tokens and is none at 8 tokens (matmul.h gives the figures);
// MatMulRowsInterleaved routes calls by size (kAmxMinTokens).
//
// Tiles: the OS must grant the process the AMX tile state (Linux: arch_prctl
// ARCH_REQ_XCOMP_PERM, done once by CpuFeatures()); each thread loads its tile
// configuration when its tile shape changes and keeps it.

// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header; the values are fully written.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kMaxTokens = kAmxMaxTileTokens;
constexpr int kBTileBytes = 512;  // 8 rows x 64 bytes: one block of 16 rows

// The 64-byte tile configuration (palette 1) of the Intel SDM.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Tiles 0 and 1: C (tokens x 16 int32) of two blocks; 4 and 6: A (tokens x 32 int8); 5
// and 7: B (8 x 64 uint8).
// The tile rows this thread's configuration is for (0: none loaded).
thread_local int configured_tokens = 0;

void ConfigureTiles(int tokens) {
  if (configured_tokens == tokens) return;
  TileConfig config;
  for (int c : {0, 1}) config.rows[c] = tokens, config.colsb[c] = 64;
  for (int a : {4, 6}) config.rows[a] = tokens, config.colsb[a] = 32;
  for (int b : {5, 7}) config.rows[b] = 8, config.colsb[b] = 64;
  // Not _tile_loadconfig: GCC 12 declares its operand as 8 bytes, so the compiler drops
  // the stores of the rest of the configuration as dead.
  asm volatile("ldtilecfg %0" : : "m"(config) : "memory");
  configured_tokens = tokens;
}

// Q4_1: the group's blocks as B tiles (nibbles split), into `out` [nb * 512].
void SplitNibbles(const uint8_t* group, int64_t nb, uint8_t* out) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = GroupQuants(GgmlType::kQ4_1, group, b);
    PrefetchAhead<GgmlType::kQ4_1>(group, b);
    uint8_t* tile = out + b * kBTileBytes;
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(block + 64 * c);
      _mm512_store_si512(tile + 64 * c, _mm512_and_si512(v, low4));
      _mm512_store_si512(tile + 64 * (c + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
    }
  }
}

// Applies one block's integer dots c[t][0..15] to the accumulators: the VNNI kernel's
// float operations (matmul_interleaved_avx512.cc, GroupTile).
template <GgmlType kType, int N>
inline void Epilogue(const int32_t (*c)[16], const uint8_t* scales, int64_t b,
                     const GroupTokenTile& x, __m512* acc) {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  __m512 m = _mm512_setzero_ps();
  if constexpr (kType == GgmlType::kQ4_1) {
    m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 32)));
  }
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) {
    __m512 dots = _mm512_cvtepi32_ps(_mm512_load_si512(c[t]));
    if constexpr (kType == GgmlType::kQ8_0) {
      dots = _mm512_add_ps(dots, _mm512_set1_ps(-128.0f * x.sum[t][b]));
    }
    acc[t] = _mm512_fmadd_ps(dots, _mm512_mul_ps(d, _mm512_set1_ps(x.d[t][b])), acc[t]);
    if constexpr (kType == GgmlType::kQ4_1) {
      acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(x.d_sum[t][b]), acc[t]);
    }
  }
}

// B tile of block b: Q4_1 from the split nibbles, Q8_0 straight from the group.
template <GgmlType kType>
inline const uint8_t* BTile(const uint8_t* group, const uint8_t* split, int64_t b) {
  if constexpr (kType == GgmlType::kQ4_1) return split + b * kBTileBytes;
  return GroupQuants(kType, group, b);
}

// noinline: one body per token count, its epilogue unrolled over the accumulators. Two
// blocks a round on two sets of tiles, so that one's multiply overlaps the other's
// epilogue.
template <GgmlType kType, int N>
__attribute__((noinline)) void AmxTile(const uint8_t* group, const uint8_t* split, int64_t nb,
                                       const GroupTokenTile& x, int64_t token_bytes,
                                       __mmask16 store_mask) {
  ConfigureTiles(N);
  __m512 acc[N];
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) acc[t] = _mm512_setzero_ps();
  alignas(64) int32_t c_even[kMaxTokens][16];
  alignas(64) int32_t c_odd[kMaxTokens][16];
  const int8_t* a = x.qs[0];  // the tile's tokens are token_bytes apart
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    if constexpr (kType == GgmlType::kQ8_0) {  // Q4_1's blocks were read by SplitNibbles
      PrefetchAhead<kType>(group, b);
      PrefetchAhead<kType>(group, b + 1);
    }
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(4, a + 32 * b, token_bytes);
    _tile_loadd(5, BTile<kType>(group, split, b), 64);
    _tile_loadd(6, a + 32 * (b + 1), token_bytes);
    _tile_loadd(7, BTile<kType>(group, split, b + 1), 64);
    _tile_dpbsud(0, 4, 5);
    _tile_dpbsud(1, 6, 7);
    _tile_stored(0, c_even, 64);
    _tile_stored(1, c_odd, 64);
    Epilogue<kType, N>(c_even, GroupScales(kType, group, b), b, x, acc);
    Epilogue<kType, N>(c_odd, GroupScales(kType, group, b + 1), b + 1, x, acc);
  }
  if (b < nb) {
    _tile_zero(0);
    _tile_loadd(4, a + 32 * b, token_bytes);
    _tile_loadd(5, BTile<kType>(group, split, b), 64);
    _tile_dpbsud(0, 4, 5);
    _tile_stored(0, c_even, 64);
    Epilogue<kType, N>(c_even, GroupScales(kType, group, b), b, x, acc);
  }
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) _mm512_mask_storeu_ps(x.y[t], store_mask, acc[t]);
}

template <GgmlType kType, int N = kMaxTokens>
void AmxTileAnyN(const uint8_t* group, const uint8_t* split, int64_t nb, const GroupTokenTile& x,
                 int64_t token_bytes, __mmask16 store_mask) {
  if constexpr (N > 1) {
    if (x.count < N) {
      return AmxTileAnyN<kType, N - 1>(group, split, nb, x, token_bytes, store_mask);
    }
  }
  AmxTile<kType, N>(group, split, nb, x, token_bytes, store_mask);
}

template <GgmlType kType>
void Group(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid, float* y,
           int64_t y_stride) {
  const __mmask16 store_mask = static_cast<__mmask16>((1u << rows_valid) - 1);
  const int64_t token_bytes = PackedTokenBytes(kType, x.cols);
  const uint8_t* split = nullptr;
  if constexpr (kType == GgmlType::kQ4_1) {
    // Split once per group: every tile of tokens reads the same B tiles.
    thread_local std::vector<uint8_t> tiles;
    if (tiles.size() < static_cast<size_t>(nb) * kBTileBytes + 64) {
      tiles.resize(static_cast<size_t>(nb) * kBTileBytes + 64);
    }
    uint8_t* aligned = tiles.data() + (64 - reinterpret_cast<uintptr_t>(tiles.data()) % 64) % 64;
    SplitNibbles(group, nb, aligned);
    split = aligned;
  }
  // Balanced tiles (sizes differ by at most one) as contiguous runs, the larger first;
  // the run of the size this thread is configured for goes first, so that a call, and
  // the next group's call after it, loads the configuration at most once: ldtilecfg
  // is slow (a 130-token prefill, tiles of 14 and 15 in turn, took 77-80 ms against
  // 68-72 for 128 tokens).
  const int64_t num_tiles = (x.tokens + kMaxTokens - 1) / kMaxTokens;
  const int small = static_cast<int>(x.tokens / num_tiles);
  const int64_t large_tiles = x.tokens % num_tiles;  // of small + 1 tokens, first
  auto run = [&](int64_t first_tile, int64_t end_tile) {
    for (int64_t k = first_tile; k < end_tile; ++k) {
      const int count = k < large_tiles ? small + 1 : small;
      const int64_t t0 = k * small + (k < large_tiles ? k : large_tiles);
      AmxTileAnyN<kType>(group, split, nb, TokenTileAt(kType, x, t0, count, y, y_stride),
                         token_bytes, store_mask);
    }
  };
  if (configured_tokens == small) {
    run(large_tiles, num_tiles);
    run(0, large_tiles);
  } else {
    run(0, num_tiles);
  }
}

}  // namespace

void Q4_1GroupAmx(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                  float* y, int64_t y_stride) {
  Group<GgmlType::kQ4_1>(group, nb, x, rows_valid, y, y_stride);
}

void Q8_0GroupAmx(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                  float* y, int64_t y_stride) {
  Group<GgmlType::kQ8_0>(group, nb, x, rows_valid, y, y_stride);
}

}  // namespace splitspec::kernels::internal
