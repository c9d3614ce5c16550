// AVX-512 matmul path: float weights (F32, F16, BF16) with FMA, and the 32-element
// block types (Q4_0, Q4_1, Q8_0) with integer dot products, two blocks per register.
//
// Block types, per row and token: blocks are taken 16 at a time (a "group"); the 16
// weight scales are gathered once and multiplied by the token's 16 activation scales;
// each pair of blocks gives 16 int32 partial sums (vpdpbusd with VNNI, else
// vpmaddubsw + vpmaddwd) that are converted to float and FMA'd, with their block's
// scale, into one of two accumulators (even / odd pair). Offsets (Q4_0's -8, Q8_0's
// +128 bias under VNNI, Q4_1's min) are applied per group with the block sums.
// Every step depends only on `cols`, never on the token count or the row range.

// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header; the values are fully written.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

inline float HorizontalSum(__m512 v) {
  const __m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
  v4 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  v4 = _mm_add_ss(v4, _mm_shuffle_ps(v4, v4, 1));
  return _mm_cvtss_f32(v4);
}

// ---------------------------------------------------------------- float weights

template <GgmlType kType>
inline __m512 LoadWeights16(const uint8_t* row, int64_t i, __mmask16 mask) {
  if constexpr (kType == GgmlType::kF32) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + i);
  } else if constexpr (kType == GgmlType::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + i));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <GgmlType kType>
struct FloatKernel {
  int64_t cols;

  template <int N>
  void Run(const uint8_t* row, const TokenTile& tile) const {
    __m512 acc[N];
    const float* x[N];
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm512_setzero_ps();
      x[t] = reinterpret_cast<const float*>(tile.x[t]);
    }
    for (int64_t i = 0; i < cols; i += 16) {
      const __mmask16 mask = cols - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - i)) - 1);
      const __m512 w = LoadWeights16<kType>(row, i, mask);
      for (int t = 0; t < N; ++t) acc[t] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(mask, x[t] + i), acc[t]);
    }
    for (int t = 0; t < N; ++t) *tile.y[t] = HorizontalSum(acc[t]);
  }
};

// ------------------------------------------------------- 32-element block weights

template <GgmlType kType>
struct Block32Layout;
template <>
struct Block32Layout<GgmlType::kQ4_0> {
  using Block = BlockQ4_0;
};
template <>
struct Block32Layout<GgmlType::kQ4_1> {
  using Block = BlockQ4_1;
};
template <>
struct Block32Layout<GgmlType::kQ8_0> {
  using Block = BlockQ8_0;
};

// Quants of blocks b and b+1 in element order [block b (32) | block b+1 (32)], as
// unsigned bytes for the multiply (Q8_0: biased by 128 under VNNI, absolute values
// otherwise with `negative` marking the lanes whose activation must be negated).
struct WeightPair {
  __m512i q;
  __mmask64 negative;
};

inline __m512i NibblePair(const uint8_t* qs0, const uint8_t* qs1, bool has_second) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0));
  const __m128i b = has_second ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)) : _mm_setzero_si128();
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);  // [qs0 | qs1]
  __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
  both = _mm512_and_si512(both, _mm512_set1_epi8(0x0F));          // [lo0 lo1 hi0 hi1]
  return _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0));  // [lo0 hi0 lo1 hi1]
}

template <GgmlType kType, bool kVnni>
inline WeightPair LoadWeightPair(const typename Block32Layout<kType>::Block* blocks, int64_t b,
                                 bool has_second) {
  if constexpr (kType == GgmlType::kQ8_0) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs));
    const __m256i c = has_second ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b + 1].qs))
                                 : _mm256_setzero_si256();
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(a), c, 1);
    const __mmask64 valid = has_second ? ~__mmask64(0) : __mmask64(0xFFFFFFFFu);
    if constexpr (kVnni) {
      return {_mm512_maskz_xor_epi32(__mmask16(has_second ? 0xFFFF : 0x00FF), q, _mm512_set1_epi8(char(0x80))), 0};
    } else {
      return {_mm512_abs_epi8(q), _mm512_movepi8_mask(q) & valid};
    }
  } else {
    return {NibblePair(blocks[b].qs, blocks[b + (has_second ? 1 : 0)].qs, has_second), 0};
  }
}

// 16 int32 partial sums of quant * activation: lanes 0-7 block b, 8-15 block b+1.
template <GgmlType kType, bool kVnni>
inline __m512i DotPair(const WeightPair& w, __m512i x) {
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, x);
  } else {
    if constexpr (kType == GgmlType::kQ8_0) x = _mm512_mask_sub_epi8(x, w.negative, _mm512_setzero_si512(), x);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(w.q, x), _mm512_set1_epi16(1));
  }
}

// What DotPair sums beyond the true quant * activation, per unit of activation sum.
template <GgmlType kType, bool kVnni>
constexpr float kQuantBias = kType == GgmlType::kQ4_0 ? 8.0f : (kType == GgmlType::kQ8_0 && kVnni ? 128.0f : 0.0f);

template <GgmlType kType, bool kVnni>
struct Block32Kernel {
  int64_t cols;

  template <int N>
  void Run(const uint8_t* row, const TokenTile& tile) const {
    using Block = typename Block32Layout<kType>::Block;
    const auto* blocks = reinterpret_cast<const Block*>(row);
    const int64_t nb = cols / 32;
    Blocks32View x[N];
    __m512 acc[N][2];
    for (int t = 0; t < N; ++t) {
      x[t] = ViewBlocks32(tile.x[t], cols);
      acc[t][0] = acc[t][1] = _mm512_setzero_ps();
    }
    const __m512i offsets = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32(sizeof(Block)));
    const __m512i pair_index0 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    for (int64_t g = 0; g < nb; g += 16) {
      const int n = nb - g >= 16 ? 16 : static_cast<int>(nb - g);
      const __mmask16 lanes = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      // d (low half) and, for Q4_1, m (high half) of the group's 16 blocks.
      const __m512i dm = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lanes, offsets, blocks + g, 1);
      const __m512 wd = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
      __m512 scale[N];
      for (int t = 0; t < N; ++t) scale[t] = _mm512_mul_ps(wd, _mm512_loadu_ps(x[t].d + g));
      for (int p = 0; 2 * p < n; ++p) {
        const int64_t b = g + 2 * p;
        const bool has_second = 2 * p + 1 < n;
        const WeightPair w = LoadWeightPair<kType, kVnni>(blocks, b, has_second);
        const __m512i index = _mm512_add_epi32(pair_index0, _mm512_set1_epi32(2 * p));
        const __mmask64 x_mask = has_second ? ~__mmask64(0) : __mmask64(0xFFFFFFFFu);
        for (int t = 0; t < N; ++t) {
          const __m512i xq = _mm512_maskz_loadu_epi8(x_mask, x[t].qs + 32 * b);
          const __m512 partial = _mm512_cvtepi32_ps(DotPair<kType, kVnni>(w, xq));
          acc[t][p & 1] = _mm512_fmadd_ps(partial, _mm512_permutexvar_ps(index, scale[t]), acc[t][p & 1]);
        }
      }
      if constexpr (kQuantBias<kType, kVnni> != 0.0f) {
        const __m512 bias = _mm512_set1_ps(-kQuantBias<kType, kVnni>);
        for (int t = 0; t < N; ++t) {
          acc[t][0] = _mm512_fmadd_ps(scale[t], _mm512_mul_ps(_mm512_loadu_ps(x[t].sum + g), bias), acc[t][0]);
        }
      }
      if constexpr (kType == GgmlType::kQ4_1) {
        const __m512 wm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
        for (int t = 0; t < N; ++t) acc[t][1] = _mm512_fmadd_ps(wm, _mm512_loadu_ps(x[t].d_sum + g), acc[t][1]);
      }
    }
    for (int t = 0; t < N; ++t) *tile.y[t] = HorizontalSum(_mm512_add_ps(acc[t][0], acc[t][1]));
  }
};

template <bool kVnni>
void MatMulRowsAvx512Impl(GgmlType weight_type, const void* w, int64_t cols,
                          const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                          int64_t y_stride) {
  switch (weight_type) {
    case GgmlType::kF32:
      return ForEachRowAndTile(FloatKernel<GgmlType::kF32>{cols}, weight_type, w, cols, x, row_begin, row_end, y, y_stride);
    case GgmlType::kF16:
      return ForEachRowAndTile(FloatKernel<GgmlType::kF16>{cols}, weight_type, w, cols, x, row_begin, row_end, y, y_stride);
    case GgmlType::kBF16:
      return ForEachRowAndTile(FloatKernel<GgmlType::kBF16>{cols}, weight_type, w, cols, x, row_begin, row_end, y, y_stride);
    case GgmlType::kQ4_0:
      return ForEachRowAndTile(Block32Kernel<GgmlType::kQ4_0, kVnni>{cols}, weight_type, w, cols, x, row_begin, row_end, y, y_stride);
    case GgmlType::kQ4_1:
      return ForEachRowAndTile(Block32Kernel<GgmlType::kQ4_1, kVnni>{cols}, weight_type, w, cols, x, row_begin, row_end, y, y_stride);
    case GgmlType::kQ8_0:
      return ForEachRowAndTile(Block32Kernel<GgmlType::kQ8_0, kVnni>{cols}, weight_type, w, cols, x, row_begin, row_end, y, y_stride);
    default:
      return MatMulRowsKQuantsAvx512(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
  }
}

}  // namespace

void MatMulRowsAvx512(GgmlType weight_type, const void* w, int64_t cols, const PackedActivations& x,
                      int64_t row_begin, int64_t row_end, float* y, int64_t y_stride) {
  MatMulRowsAvx512Impl<false>(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
}

void MatMulRowsAvx512Vnni(GgmlType weight_type, const void* w, int64_t cols,
                          const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                          int64_t y_stride) {
  MatMulRowsAvx512Impl<true>(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
}

}  // namespace splitspec::kernels::internal
