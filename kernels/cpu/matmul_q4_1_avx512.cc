// AVX-512 Q4_1 on interleaved rows (matmul.h, "Interleaved rows" and "Q4_1 order").
//
// Per 16-row group and block, the four 64-byte quant chunks unpack into eight registers
// of unsigned nibbles, register j holding elements 4j..4j+3 of every row's block (j < 4:
// low nibbles of chunk j; j >= 4: high nibbles of chunk j - 4), lane i = row i. Each
// token's activations for those elements are one broadcast 32-bit word, so eight
// vpdpbusd (or vpmaddubsw + vpmaddwd + add without VNNI) give the 16 rows' exact block
// dots, and one convert and two FMAs per token apply the block's scales and minimum: no
// horizontal sum anywhere. The unpacked registers serve every token of a tile (up to
// kMaxTokens), so a verification block reads and unpacks each group once.

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

constexpr int kMaxTokens = 10;  // accumulators per tile: 10 + 8 weights + temporaries < 32

// The tile's tokens: quants, block scales and d_sum of each.
struct TokenRefs {
  const int8_t* qs[kMaxTokens];
  const float* d[kMaxTokens];
  const float* d_sum[kMaxTokens];
};

inline int32_t Word(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The exact integer dot of the 16 rows' block (unpacked in w) with one token's 32 quants.
template <bool kVnni>
inline __m512i BlockDots(const __m512i (&w)[8], const int8_t* xq) {
  if constexpr (kVnni) {
    __m512i even = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], _mm512_set1_epi32(Word(xq)));
    __m512i odd =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], _mm512_set1_epi32(Word(xq + 4)));
#pragma GCC unroll 8
    for (int j = 2; j < 8; j += 2) {
      even = _mm512_dpbusd_epi32(even, w[j], _mm512_set1_epi32(Word(xq + 4 * j)));
      odd = _mm512_dpbusd_epi32(odd, w[j + 1], _mm512_set1_epi32(Word(xq + 4 * j + 4)));
    }
    return _mm512_add_epi32(even, odd);
  } else {
    const __m512i ones = _mm512_set1_epi16(1);
    __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m512i pairs = _mm512_maddubs_epi16(w[j], _mm512_set1_epi32(Word(xq + 4 * j)));
      sum = _mm512_add_epi32(sum, _mm512_madd_epi16(pairs, ones));
    }
    return sum;
  }
}

template <bool kVnni, int N>
__attribute__((noinline)) void GroupTile(const uint8_t* group, int64_t nb, const TokenRefs& x, __mmask16 store_mask,
               float* const* y) {
  __m512 acc[N];  // the token loops are unrolled so that acc stays in registers
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kQ4_1GroupBlockBytes;
    __m512i w[8];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(block + 64 * c);
      w[c] = _mm512_and_si512(v, low4);
      w[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    const __m512 wd =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 256)));
    const __m512 wm =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 288)));
#pragma GCC unroll 16
    for (int t = 0; t < N; ++t) {
      const __m512 dots = _mm512_cvtepi32_ps(BlockDots<kVnni>(w, x.qs[t] + 32 * b));
      const __m512 scale = _mm512_mul_ps(wd, _mm512_set1_ps(x.d[t][b]));
      acc[t] = _mm512_fmadd_ps(dots, scale, acc[t]);
      acc[t] = _mm512_fmadd_ps(wm, _mm512_set1_ps(x.d_sum[t][b]), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < N; ++t) _mm512_mask_storeu_ps(y[t], store_mask, acc[t]);
}

template <bool kVnni, int N = kMaxTokens>
void GroupTileAnyN(int count, const uint8_t* group, int64_t nb, const TokenRefs& x,
                   __mmask16 store_mask, float* const* y) {
  if constexpr (N > 1) {
    if (count < N) return GroupTileAnyN<kVnni, N - 1>(count, group, nb, x, store_mask, y);
  }
  GroupTile<kVnni, N>(group, nb, x, store_mask, y);
}

// Tiles of at most kMaxTokens tokens, of balanced sizes (they differ by at most one).
template <bool kVnni>
void Group(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid, float* y,
           int64_t y_stride) {
  const int64_t token_bytes = PackedTokenBytes(GgmlType::kQ4_1, x.cols);
  const __mmask16 store_mask = static_cast<__mmask16>((1u << rows_valid) - 1);
  const int64_t num_tiles = (x.tokens + kMaxTokens - 1) / kMaxTokens;
  for (int64_t k = 0; k < num_tiles; ++k) {
    const int64_t t0 = x.tokens * k / num_tiles;
    const int count = static_cast<int>(x.tokens * (k + 1) / num_tiles - t0);
    TokenRefs refs;
    float* out[kMaxTokens];
    for (int i = 0; i < count; ++i) {
      const Blocks32View v = ViewBlocks32(x.data.data() + (t0 + i) * token_bytes, x.cols);
      refs.qs[i] = v.qs;
      refs.d[i] = v.d;
      refs.d_sum[i] = v.d_sum;
      out[i] = y + (t0 + i) * y_stride;
    }
    GroupTileAnyN<kVnni>(count, group, nb, refs, store_mask, out);
  }
}

}  // namespace

void Q4_1GroupAvx512(const uint8_t* group, int64_t nb, const PackedActivations& x,
                     int rows_valid, float* y, int64_t y_stride) {
  Group<false>(group, nb, x, rows_valid, y, y_stride);
}

void Q4_1GroupAvx512Vnni(const uint8_t* group, int64_t nb, const PackedActivations& x,
                         int rows_valid, float* y, int64_t y_stride) {
  Group<true>(group, nb, x, rows_valid, y, y_stride);
}

}  // namespace splitspec::kernels::internal
