// AVX2 matmul path: float weights (F32, F16, BF16) with FMA, and Q4_0 with integer dot
// products, one block per register (Q4_1 and Q8_0 run on interleaved rows:
// matmul_interleaved_avx2.cc; the K-quants: matmul_kquants_avx2.cc).
//
// Q4_0, per row and token: blocks are taken 8 at a time (a "group"); the 8 weight scales
// are converted once and multiplied by the token's 8 activation scales; each block gives
// 8 int32 partial sums (vpmaddubsw + vpmaddwd) that are converted to float and FMA'd,
// with the block's scale, into one of two accumulators. The -8 offset is applied per
// group with the block sums. Every step depends only on `cols`.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

inline float HorizontalSum(__m256 v) {
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  v4 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  v4 = _mm_add_ss(v4, _mm_shuffle_ps(v4, v4, 1));
  return _mm_cvtss_f32(v4);
}

// ---------------------------------------------------------------- float weights

// Lanes [0, n) of a mask for _mm256_maskload_ps (n in [0, 8]).
inline __m256i LaneMask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <GgmlType kType>
inline __m256 LoadWeights8(const uint8_t* row, int64_t i) {
  if constexpr (kType == GgmlType::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (kType == GgmlType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The last cols % 8 weights, zero-padded (no read past the row).
template <GgmlType kType>
inline __m256 LoadWeightsTail(const uint8_t* row, int64_t i, int64_t n) {
  alignas(32) float w[8] = {};
  for (int64_t k = 0; k < n; ++k) {
    if constexpr (kType == GgmlType::kF32) {
      w[k] = reinterpret_cast<const float*>(row)[i + k];
    } else {
      uint16_t h;
      __builtin_memcpy(&h, row + 2 * (i + k), 2);
      w[k] = kType == GgmlType::kF16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
    }
  }
  return _mm256_load_ps(w);
}

template <GgmlType kType>
struct FloatKernel {
  int64_t cols;
  static constexpr int kTile = 8;

  template <int N>
  void Run(const uint8_t* row, int64_t r, const TokenTile& tile) const {
    __m256 acc[N];
    const float* x[N];
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm256_setzero_ps();
      x[t] = reinterpret_cast<const float*>(tile.x[t]);
    }
    int64_t i = 0;
    for (; i + 8 <= cols; i += 8) {
      const __m256 w = LoadWeights8<kType>(row, i);
      for (int t = 0; t < N; ++t) acc[t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x[t] + i), acc[t]);
    }
    if (i < cols) {
      const __m256 w = LoadWeightsTail<kType>(row, i, cols - i);
      const __m256i mask = LaneMask(cols - i);
      for (int t = 0; t < N; ++t)
        acc[t] = _mm256_fmadd_ps(w, _mm256_maskload_ps(x[t] + i, mask), acc[t]);
    }
    for (int t = 0; t < N; ++t) tile.y[t][r] = HorizontalSum(acc[t]);
  }
};

// ------------------------------------------------------- 32-element block weights

template <GgmlType kType>
struct Block32Layout;
template <>
struct Block32Layout<GgmlType::kQ4_0> {
  using Block = BlockQ4_0;
};

// Quants of one block as unsigned bytes in element order.
template <GgmlType kType>
inline __m256i LoadWeightBlock(const typename Block32Layout<kType>::Block& block) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

template <GgmlType kType>
inline __m256i Dot(__m256i w, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
}

template <GgmlType kType>
struct Block32Kernel {
  int64_t cols;
  // Tokens per weight pass: 16 ymm registers hold 2 accumulators + 1 scale per token.
  static constexpr int kTile = 4;

  // Block b of every token into acc.
  template <int N>
  static inline void Block(const typename Block32Layout<kType>::Block& block, int64_t b,
                           __m256i scale_index, const __m256 (&scale)[N],
                           const int8_t* const (&xq)[N], __m256 (&acc)[N]) {
    const __m256i w = LoadWeightBlock<kType>(block);
    for (int t = 0; t < N; ++t) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + 32 * b));
      const __m256 partial = _mm256_cvtepi32_ps(Dot<kType>(w, x));
      acc[t] = _mm256_fmadd_ps(partial, _mm256_permutevar8x32_ps(scale[t], scale_index), acc[t]);
    }
  }

  // Per group of 8 blocks: blocks alternate between acc0 and acc1 (an odd last block goes
  // to acc0), the per-group offsets to acc0;
  // y = sum of the lanes of acc0 + acc1.
  template <int N>
  void Run(const uint8_t* row, int64_t r, const TokenTile& tile) const {
    using BlockType = typename Block32Layout<kType>::Block;
    const auto* blocks = reinterpret_cast<const BlockType*>(row);
    const int64_t nb = cols / 32;
    const int64_t padded = Blocks32Padded(nb);
    const int8_t*
        xq[N];  // token t: quants; then d, d_sum, sum at cols, + padded, + 2 padded floats
    __m256 acc0[N], acc1[N];
    for (int t = 0; t < N; ++t) {
      xq[t] = reinterpret_cast<const int8_t*>(tile.x[t]);
      acc0[t] = acc1[t] = _mm256_setzero_ps();
    }
    const __m256i one = _mm256_set1_epi32(1);
    for (int64_t g = 0; g < nb; g += 8) {
      const int n = nb - g >= 8 ? 8 : static_cast<int>(nb - g);
      // The first 4 bytes of each block: d and the next field (gathered; lanes >= n zero).
      const __m256i lanes =
          _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                 _mm256_set1_epi32(sizeof(BlockType)));
      const __m256i heads = _mm256_mask_i32gather_epi32(
          _mm256_setzero_si256(), reinterpret_cast<const int*>(blocks + g), offsets, lanes, 1);
      // [d0-3 m0-3 | d4-7 m4-7] -> [d0-7 | m0-7] as fp16.
      const __m256i halves = _mm256_permute4x64_epi64(
          _mm256_packus_epi32(_mm256_and_si256(heads, _mm256_set1_epi32(0xFFFF)),
                              _mm256_srli_epi32(heads, 16)),
          _MM_SHUFFLE(3, 1, 2, 0));
      const __m256 wd = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
      __m256 scale[N];
      for (int t = 0; t < N; ++t) {
        scale[t] =
            _mm256_mul_ps(wd, _mm256_loadu_ps(reinterpret_cast<const float*>(xq[t] + cols) + g));
      }
      __m256i index = _mm256_setzero_si256();
      int k = 0;
      for (; k + 1 < n; k += 2) {
        Block<N>(blocks[g + k], g + k, index, scale, xq, acc0);
        index = _mm256_add_epi32(index, one);
        Block<N>(blocks[g + k + 1], g + k + 1, index, scale, xq, acc1);
        index = _mm256_add_epi32(index, one);
      }
      if (k < n) Block<N>(blocks[g + k], g + k, index, scale, xq, acc0);
      if constexpr (kType == GgmlType::kQ4_0) {
        const __m256 bias = _mm256_set1_ps(-8.0f);
        for (int t = 0; t < N; ++t) {
          const __m256 sum =
              _mm256_loadu_ps(reinterpret_cast<const float*>(xq[t] + cols) + 2 * padded + g);
          acc0[t] = _mm256_fmadd_ps(scale[t], _mm256_mul_ps(sum, bias), acc0[t]);
        }
      }
    }
    for (int t = 0; t < N; ++t) tile.y[t][r] = HorizontalSum(_mm256_add_ps(acc0[t], acc1[t]));
  }
};

}  // namespace

void MatMulRowsAvx2(GgmlType weight_type, const void* w, int64_t cols, const PackedActivations& x,
                    int64_t row_begin, int64_t row_end, float* y, int64_t y_stride) {
  switch (weight_type) {
    case GgmlType::kF32:
      return ForEachRowAndTile(FloatKernel<GgmlType::kF32>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kF16:
      return ForEachRowAndTile(FloatKernel<GgmlType::kF16>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kBF16:
      return ForEachRowAndTile(FloatKernel<GgmlType::kBF16>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ4_0:
      return ForEachRowAndTile(Block32Kernel<GgmlType::kQ4_0>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ4_1:
      return RowsByGroups(weight_type, Q4_1GroupAvx2, w, cols, x, row_begin, row_end, y, y_stride);
    case GgmlType::kQ8_0:
      return RowsByGroups(weight_type, Q8_0GroupAvx2, w, cols, x, row_begin, row_end, y, y_stride);
    default:
      return MatMulRowsKQuantsAvx2(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
  }
}

}  // namespace splitspec::kernels::internal
