// AVX2 Q4_1 on interleaved rows: matmul_q4_1_avx512.cc's algorithm on 8 rows per
// register (each 16-row group as two halves: the low and high 32 bytes of every
// chunk, d and m), with vpmaddubsw + vpmaddwd for the integer dots. The same float
// operations per output, so the same bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kMaxTokens = 6;  // 6 accumulators + 8 weights + temporaries <= 16 registers

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

inline __m256i BlockDots(const __m256i (&w)[8], const int8_t* xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m256i pairs = _mm256_maddubs_epi16(w[j], _mm256_set1_epi32(Word(xq + 4 * j)));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
  }
  return sum;
}

// Rows 8h..8h+7 of the group (h = half) for the tile's N tokens.
template <int N>
void HalfGroupTile(const uint8_t* group, int half, int64_t nb, const TokenRefs& x, int rows_valid,
                   float* const* y) {
  __m256 acc[N];  // the token loops are unrolled so that acc stays in registers
#pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * kQ4_1GroupBlockBytes;
    __m256i w[8];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i v =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * c + 32 * half));
      w[c] = _mm256_and_si256(v, low4);
      w[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
    const __m256 wd =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 256 + 16 * half)));
    const __m256 wm =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 288 + 16 * half)));
#pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m256 dots = _mm256_cvtepi32_ps(BlockDots(w, x.qs[t] + 32 * b));
      const __m256 scale = _mm256_mul_ps(wd, _mm256_set1_ps(x.d[t][b]));
      acc[t] = _mm256_fmadd_ps(dots, scale, acc[t]);
      acc[t] = _mm256_fmadd_ps(wm, _mm256_set1_ps(x.d_sum[t][b]), acc[t]);
    }
  }
  const int rows = rows_valid - 8 * half < 8 ? rows_valid - 8 * half : 8;
  for (int t = 0; t < N; ++t) {
    if (rows == 8) {
      _mm256_storeu_ps(y[t] + 8 * half, acc[t]);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[t]);
      std::memcpy(y[t] + 8 * half, lanes, sizeof(float) * rows);
    }
  }
}

template <int N = kMaxTokens>
void HalfGroupTileAnyN(int count, const uint8_t* group, int half, int64_t nb, const TokenRefs& x,
                       int rows_valid, float* const* y) {
  if constexpr (N > 1) {
    if (count < N) return HalfGroupTileAnyN<N - 1>(count, group, half, nb, x, rows_valid, y);
  }
  HalfGroupTile<N>(group, half, nb, x, rows_valid, y);
}

}  // namespace

void Q4_1GroupAvx2(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                   float* y, int64_t y_stride) {
  const int64_t token_bytes = PackedTokenBytes(GgmlType::kQ4_1, x.cols);
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
    for (int half = 0; 8 * half < rows_valid; ++half) {
      HalfGroupTileAnyN(count, group, half, nb, refs, rows_valid, out);
    }
  }
}

}  // namespace splitspec::kernels::internal
