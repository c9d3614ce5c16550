// AVX2 kernels on interleaved rows: matmul_interleaved_avx512.cc's algorithm on 8 rows per
// register (each 16-row group as two halves: the low and high 32 bytes of every chunk,
// and of d and m), with vpmaddubsw + vpmaddwd for the integer dots (Q8_0 through |w| and
// vpsignb on the activation). The same float operations per output, so the same bits.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kMaxTokens = 6;  // 6 accumulators + 8 weights + temporaries <= 16 registers

inline int32_t Word(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One block of 8 rows. Q4_1 keeps its nibbles in registers; Q8_0's |w| and signed w
// live in L1 (16 registers would not fit beside the accumulators).
template <GgmlType kType>
struct HalfBlock;
template <>
struct HalfBlock<GgmlType::kQ4_1> {
  __m256i w[8];
  __m256 d, m;
  void Load(const uint8_t* group, int64_t b, int half) {
    const uint8_t* block = GroupQuants(GgmlType::kQ4_1, group, b);
    const uint8_t* scales = GroupScales(GgmlType::kQ4_1, group, b);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i v =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * c + 32 * half));
      w[c] = _mm256_and_si256(v, low4);
      w[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
    d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * half)));
    m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 32 + 16 * half)));
  }
  __m256i Pairs(int j, __m256i x) const { return _mm256_maddubs_epi16(w[j], x); }
};
template <>
struct HalfBlock<GgmlType::kQ8_0> {
  alignas(32) __m256i abs_w[8];
  alignas(32) __m256i signed_w[8];
  __m256 d, m;
  void Load(const uint8_t* group, int64_t b, int half) {
    const uint8_t* block = GroupQuants(GgmlType::kQ8_0, group, b);
    const uint8_t* scales = GroupScales(GgmlType::kQ8_0, group, b);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i v =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * j + 32 * half));
      signed_w[j] = _mm256_xor_si256(v, _mm256_set1_epi8(char(0x80)));
      abs_w[j] = _mm256_abs_epi8(signed_w[j]);
    }
    d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * half)));
    m = _mm256_setzero_ps();
  }
  __m256i Pairs(int j, __m256i x) const {
    return _mm256_maddubs_epi16(abs_w[j], _mm256_sign_epi8(x, signed_w[j]));
  }
};

template <GgmlType kType>
inline __m256 BlockDots(const HalfBlock<kType>& g, const int8_t* xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __m256i pairs = g.Pairs(j, _mm256_set1_epi32(Word(xq + 4 * j)));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
  }
  return _mm256_cvtepi32_ps(sum);
}

// Rows 8h..8h+7 of the group (h = half) for the tile's N tokens.
template <GgmlType kType, int N>
__attribute__((noinline)) void HalfGroupTile(const uint8_t* group, int half, int64_t nb,
                                             const GroupTokenTile& x, int rows_valid) {
  __m256 acc[N];  // the token loops are unrolled so that acc stays in registers
#pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (half == 0) PrefetchAhead<kType>(group, b);  // the second half finds it cached
    HalfBlock<kType> g;
    g.Load(group, b, half);
#pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      const __m256 dots = BlockDots<kType>(g, x.qs[t] + 32 * b);
      acc[t] = _mm256_fmadd_ps(dots, _mm256_mul_ps(g.d, _mm256_set1_ps(x.d[t][b])), acc[t]);
      if constexpr (kType == GgmlType::kQ4_1) {
        acc[t] = _mm256_fmadd_ps(g.m, _mm256_set1_ps(x.d_sum[t][b]), acc[t]);
      }
    }
  }
  const int rows = rows_valid - 8 * half < 8 ? rows_valid - 8 * half : 8;
  for (int t = 0; t < N; ++t) {
    if (rows == 8) {
      _mm256_storeu_ps(x.y[t] + 8 * half, acc[t]);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[t]);
      std::memcpy(x.y[t] + 8 * half, lanes, sizeof(float) * rows);
    }
  }
}

template <GgmlType kType, int N = kMaxTokens>
void HalfGroupTileAnyN(const uint8_t* group, int half, int64_t nb, const GroupTokenTile& x,
                       int rows_valid) {
  if constexpr (N > 1) {
    if (x.count < N) return HalfGroupTileAnyN<kType, N - 1>(group, half, nb, x, rows_valid);
  }
  HalfGroupTile<kType, N>(group, half, nb, x, rows_valid);
}

template <GgmlType kType>
void Group(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid, float* y,
           int64_t y_stride) {
  ForEachBalancedTile(kType, x, kMaxTokens, y, y_stride, [&](const GroupTokenTile& tile) {
    for (int half = 0; 8 * half < rows_valid; ++half) {
      HalfGroupTileAnyN<kType>(group, half, nb, tile, rows_valid);
    }
  });
}

}  // namespace

void Q4_1GroupAvx2(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                   float* y, int64_t y_stride) {
  Group<GgmlType::kQ4_1>(group, nb, x, rows_valid, y, y_stride);
}

void Q8_0GroupAvx2(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                   float* y, int64_t y_stride) {
  Group<GgmlType::kQ8_0>(group, nb, x, rows_valid, y, y_stride);
}

}  // namespace splitspec::kernels::internal
