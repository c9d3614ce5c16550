// AVX-512 kernels on interleaved rows (matmul.h, "Interleaved rows", "Q4_1 order",
// "Q8_0 order").
//
// Per 16-row group and block, the block's quants become eight registers of unsigned
// bytes, register j holding elements 4j..4j+3 of every row's block, lane i = row i
// (Q4_1: the low and high nibbles of four 64-byte chunks, j < 4 low nibbles of chunk j,
// j >= 4 high nibbles of chunk j - 4; Q8_0: eight chunks stored with a +128 bias). Each
// token's activations for those elements are one broadcast 32-bit word, so eight
// vpdpbusd give the 16 rows' block dots (Q8_0: less 128 times the activation block sum,
// exactly, in float), and one convert and one or two FMAs per token apply the block's
// scales (and Q4_1's minimum): no horizontal sum anywhere. Without VNNI the same exact
// integers come from vpmaddubsw + vpmaddwd (Q8_0 through |w| and the sign moved onto the
// activation, so that no 16-bit pair sum saturates). The unpacked registers serve every
// token of a tile (up to kMaxTokens), so a verification block reads each group once.

// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header; the values are fully written.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

// 10 accumulators + 8 weights + temporaries < 32 registers.
constexpr int kMaxTokens = kMaxVectorTileTokens;

inline int32_t Word(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One block of the group's 16 rows, ready for every token of the tile.
struct GroupBlock {
  __m512i w[8];           // unsigned quants (Q8_0 under VNNI: biased by +128)
  __mmask64 negative[8];  // Q8_0 without VNNI: lanes whose weight is negative (w holds |w|)
  __m512 d;               // the rows' scales
  __m512 m;               // Q4_1: the rows' minimums
};

template <GgmlType kType, bool kVnni>
inline void LoadGroupBlock(const uint8_t* group, int64_t b, GroupBlock* out) {
  const uint8_t* block = GroupQuants(kType, group, b);
  const uint8_t* scales = GroupScales(kType, group, b);
  if constexpr (kType == GgmlType::kQ4_1) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(block + 64 * c);
      out->w[c] = _mm512_and_si512(v, low4);
      out->w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    out->d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
    out->m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 32)));
  } else {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i v = _mm512_loadu_si512(block + 64 * j);
      if constexpr (kVnni) {
        out->w[j] = v;
      } else {
        const __m512i w = _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));  // signed
        out->w[j] = _mm512_abs_epi8(w);
        out->negative[j] = _mm512_movepi8_mask(w);
      }
    }
    out->d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  }
}

// The 16 rows' exact block dots with one token's 32 quants, as floats.
template <GgmlType kType, bool kVnni>
inline __m512 BlockDots(const GroupBlock& g, const int8_t* xq, float xsum) {
  if constexpr (kVnni) {
    __m512i even = _mm512_dpbusd_epi32(_mm512_setzero_si512(), g.w[0], _mm512_set1_epi32(Word(xq)));
    __m512i odd =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), g.w[1], _mm512_set1_epi32(Word(xq + 4)));
#pragma GCC unroll 8
    for (int j = 2; j < 8; j += 2) {
      even = _mm512_dpbusd_epi32(even, g.w[j], _mm512_set1_epi32(Word(xq + 4 * j)));
      odd = _mm512_dpbusd_epi32(odd, g.w[j + 1], _mm512_set1_epi32(Word(xq + 4 * j + 4)));
    }
    const __m512 dots = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
    if constexpr (kType == GgmlType::kQ8_0) {
      // Integers below 2^24 on both sides: the subtraction is exact.
      return _mm512_add_ps(dots, _mm512_set1_ps(-128.0f * xsum));
    }
    return dots;
  } else {
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i x = _mm512_set1_epi32(Word(xq + 4 * j));
      if constexpr (kType == GgmlType::kQ8_0) {
        x = _mm512_mask_sub_epi8(x, g.negative[j], _mm512_setzero_si512(), x);
      }
      const __m512i pairs = _mm512_maddubs_epi16(g.w[j], x);
      sum = _mm512_add_epi32(sum, _mm512_madd_epi16(pairs, ones));
    }
    return _mm512_cvtepi32_ps(sum);
  }
}

// noinline: one compact body per tile size, its token loops unrolled so that the
// accumulators stay in registers.
template <GgmlType kType, bool kVnni, int N>
__attribute__((noinline)) void GroupTile(const uint8_t* group, int64_t nb, const GroupTokenTile& x,
                                         __mmask16 store_mask) {
  __m512 acc[N];
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchAhead<kType>(group, b);
    GroupBlock g;
    LoadGroupBlock<kType, kVnni>(group, b, &g);
#pragma GCC unroll 16
    for (int t = 0; t < N; ++t) {
      const float xsum = kType == GgmlType::kQ8_0 ? x.sum[t][b] : 0.0f;
      const __m512 dots = BlockDots<kType, kVnni>(g, x.qs[t] + 32 * b, xsum);
      acc[t] = _mm512_fmadd_ps(dots, _mm512_mul_ps(g.d, _mm512_set1_ps(x.d[t][b])), acc[t]);
      if constexpr (kType == GgmlType::kQ4_1) {
        acc[t] = _mm512_fmadd_ps(g.m, _mm512_set1_ps(x.d_sum[t][b]), acc[t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) _mm512_mask_storeu_ps(x.y[t], store_mask, acc[t]);
}

template <GgmlType kType, bool kVnni, int N = kMaxTokens>
void GroupTileAnyN(const uint8_t* group, int64_t nb, const GroupTokenTile& x,
                   __mmask16 store_mask) {
  if constexpr (N > 1) {
    if (x.count < N) return GroupTileAnyN<kType, kVnni, N - 1>(group, nb, x, store_mask);
  }
  GroupTile<kType, kVnni, N>(group, nb, x, store_mask);
}

template <GgmlType kType, bool kVnni>
void Group(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid, float* y,
           int64_t y_stride) {
  const __mmask16 store_mask = static_cast<__mmask16>((1u << rows_valid) - 1);
  ForEachBalancedTile(kType, x, kMaxTokens, y, y_stride, [&](const GroupTokenTile& tile) {
    GroupTileAnyN<kType, kVnni>(group, nb, tile, store_mask);
  });
}

}  // namespace

void Q4_1GroupAvx512(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                     float* y, int64_t y_stride) {
  Group<GgmlType::kQ4_1, false>(group, nb, x, rows_valid, y, y_stride);
}

void Q4_1GroupAvx512Vnni(const uint8_t* group, int64_t nb, const PackedActivations& x,
                         int rows_valid, float* y, int64_t y_stride) {
  Group<GgmlType::kQ4_1, true>(group, nb, x, rows_valid, y, y_stride);
}

void Q8_0GroupAvx512(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                     float* y, int64_t y_stride) {
  Group<GgmlType::kQ8_0, false>(group, nb, x, rows_valid, y, y_stride);
}

void Q8_0GroupAvx512Vnni(const uint8_t* group, int64_t nb, const PackedActivations& x,
                         int rows_valid, float* y, int64_t y_stride) {
  Group<GgmlType::kQ8_0, true>(group, nb, x, rows_valid, y, y_stride);
}

}  // namespace splitspec::kernels::internal
