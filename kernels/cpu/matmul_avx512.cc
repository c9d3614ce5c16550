// AVX-512 matmul path: float weights (F32, F16, BF16) with FMA, and Q4_0 with integer
// dot products, two blocks per register (Q4_1 and Q8_0 run on interleaved rows:
// matmul_interleaved_avx512.cc; the K-quants: matmul_kquants_avx512.cc).
//
// Q4_0, per row and token: blocks are taken 16 at a time (a "group"); the 16 weight
// scales are picked out of the blocks with vpermt2w (LoadBlockHeads) once per row and
// group, and multiplied by the token's 16 activation scales; each pair of blocks gives
// 16 int32 partial sums (vpdpbusd with VNNI, else vpmaddubsw + vpmaddwd) that are
// converted to float and FMA'd, with their block's scale, into one of two accumulators.
// The -8 offset is applied per group with the block sums. Every step depends only on
// `cols`, never on the token count or the row range. (VNNI instructions appear only in
// the kVnni = true instantiations, checked with objdump; the file is compiled with
// -mavx512vnni.)

// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header; the values are fully written.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

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
    return _mm512_cvtph_ps(
        _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + i));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(row) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <GgmlType kType>
struct FloatKernel {
  int64_t cols;
  static constexpr int kTile = 9;

  template <int N>
  void Run(const uint8_t* row, int64_t r, const TokenTile& tile) const {
    __m512 acc[N];
    const float* x[N];
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm512_setzero_ps();
      x[t] = reinterpret_cast<const float*>(tile.x[t]);
    }
    for (int64_t i = 0; i < cols; i += 16) {
      const __mmask16 mask = cols - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - i)) - 1);
      const __m512 w = LoadWeights16<kType>(row, i, mask);
      for (int t = 0; t < N; ++t)
        acc[t] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(mask, x[t] + i), acc[t]);
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

// Quants of blocks b and b+1 in element order [block b (32) | block b+1 (32)], as
// unsigned bytes for the multiply.
struct WeightPair {
  __m512i q;
};

// [low nibbles of qs0 | high nibbles of qs0 | the same of qs1] = the 64 quants of two
// Q4 blocks in element order; qs1 == nullptr gives zeros for the second block.
inline __m512i NibblePair(const uint8_t* qs0, const uint8_t* qs1) {
  __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0)));
  v = qs1 != nullptr ? _mm512_mask_broadcast_i32x4(
                           v, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)))
                     : _mm512_maskz_mov_epi32(0x00FF, v);
  const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                          0x0004000400040004, 0x0004000400040004, 0, 0);
  return _mm512_and_si512(_mm512_srlv_epi16(v, shifts), _mm512_set1_epi8(0x0F));
}

template <GgmlType kType, bool kVnni>
inline WeightPair LoadWeightPair(const typename Block32Layout<kType>::Block* blocks, int64_t b,
                                 bool has_second) {
  return {NibblePair(blocks[b].qs, has_second ? blocks[b + 1].qs : nullptr)};
}

// 16 int32 partial sums of quant * activation: lanes 0-7 block b, 8-15 block b+1.
template <GgmlType kType, bool kVnni>
inline __m512i DotPair(const WeightPair& w, __m512i x) {
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, x);
  } else {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(w.q, x), _mm512_set1_epi16(1));
  }
}

// Lanes [0, n) of a 64-byte mask (n clamped to [0, 64]).
inline __mmask64 ByteMask(int64_t n) {
  return n >= 64 ? ~__mmask64(0) : (n <= 0 ? __mmask64(0) : (__mmask64(1) << n) - 1);
}

// Where the 16-bit fields d (word lanes 0-15) and the next ones (lanes 16-31),
// of the 16 blocks of a group sit, per 128-byte chunk of the group: vpermt2w indices
// into the chunk's 64 words and the lanes they fill.
template <int kBlockBytes>
struct BlockHeadIndex {
  static constexpr int kChunks = (16 * kBlockBytes + 127) / 128;
  int16_t index[kChunks][32] = {};
  uint32_t lanes[kChunks] = {};
  constexpr BlockHeadIndex() {
    for (int lane = 0; lane < 32; ++lane) {
      const int word = (lane % 16) * kBlockBytes / 2 + lane / 16;
      index[word / 64][lane] = static_cast<int16_t>(word % 64);
      lanes[word / 64] |= 1u << lane;
    }
  }
};
template <int kBlockBytes>
alignas(64) inline constexpr BlockHeadIndex<kBlockBytes> kBlockHeadIndex{};

// The d fields of the group's first n blocks as fp16 in word lanes 0-15 and the fields
// after them in lanes 16-31; lanes of blocks >= n are zero. Reads only the n blocks.
// (A permute per 128 bytes: cheaper than a 16-lane gather.)
template <int kBlockBytes>
inline __m512i LoadBlockHeads(const uint8_t* group, int n) {
  using Index = BlockHeadIndex<kBlockBytes>;
  const Index& table = kBlockHeadIndex<kBlockBytes>;
  __m512i heads = _mm512_setzero_si512();
  if (n == 16) {  // a full group: the masks are constants
    constexpr int64_t kBytes = 16 * kBlockBytes;
    for (int c = 0; c < Index::kChunks; ++c) {
      const __m512i lo = _mm512_maskz_loadu_epi8(ByteMask(kBytes - 128 * c), group + 128 * c);
      const __m512i hi =
          _mm512_maskz_loadu_epi8(ByteMask(kBytes - 128 * c - 64), group + 128 * c + 64);
      const __m512i index = _mm512_loadu_si512(table.index[c]);
      heads =
          _mm512_or_si512(heads, _mm512_maskz_permutex2var_epi16(table.lanes[c], lo, index, hi));
    }
    return heads;
  }
  const int64_t bytes = static_cast<int64_t>(n) * kBlockBytes;
  for (int c = 0; c < Index::kChunks && 128 * c < bytes; ++c) {
    const __m512i lo = _mm512_maskz_loadu_epi8(ByteMask(bytes - 128 * c), group + 128 * c);
    const __m512i hi =
        _mm512_maskz_loadu_epi8(ByteMask(bytes - 128 * c - 64), group + 128 * c + 64);
    const __m512i index = _mm512_loadu_si512(table.index[c]);
    heads = _mm512_or_si512(heads, _mm512_maskz_permutex2var_epi16(table.lanes[c], lo, index, hi));
  }
  return heads;
}

// What DotPair sums beyond the true quant * activation, per unit of activation sum.
template <GgmlType kType, bool kVnni>
constexpr float kQuantBias = kType == GgmlType::kQ4_0 ? 8.0f : 0.0f;

template <GgmlType kType, bool kVnni>
struct Block32Kernel {
  int64_t cols;
  static constexpr int kTile = 9;

  // One pair of blocks (b, b+1; b alone when !has_second) of every token into acc.
  template <int N>
  static inline void Pair(const typename Block32Layout<kType>::Block* blocks, int64_t b,
                          bool has_second, __m512i scale_index, const __m512 (&scale)[N],
                          const int8_t* const (&xq)[N], __m512 (&acc)[N]) {
    const WeightPair w = LoadWeightPair<kType, kVnni>(blocks, b, has_second);
    for (int t = 0; t < N; ++t) {
      const __m512i x = has_second
                            ? _mm512_loadu_si512(xq[t] + 32 * b)
                            : _mm512_maskz_loadu_epi8(__mmask64(0xFFFFFFFFu), xq[t] + 32 * b);
      const __m512 partial = _mm512_cvtepi32_ps(DotPair<kType, kVnni>(w, x));
      acc[t] = _mm512_fmadd_ps(partial, _mm512_permutexvar_ps(scale_index, scale[t]), acc[t]);
    }
  }

  // Per group of 16 blocks: full pairs alternate between acc0 and acc1 (an odd last full
  // pair goes to acc0), a lone last block goes to acc1, the per-group offsets to acc0
  // (Q4_0); y = sum of the lanes of acc0 + acc1.
  template <int N>
  void Run(const uint8_t* row, int64_t r, const TokenTile& tile) const {
    using Block = typename Block32Layout<kType>::Block;
    const auto* blocks = reinterpret_cast<const Block*>(row);
    const int64_t nb = cols / 32;
    const int64_t padded = Blocks32Padded(nb);
    const int8_t*
        xq[N];  // token t: quants; then d, d_sum, sum at cols, + padded, + 2 padded floats
    __m512 acc0[N], acc1[N];
    for (int t = 0; t < N; ++t) {
      xq[t] = reinterpret_cast<const int8_t*>(tile.x[t]);
      acc0[t] = acc1[t] = _mm512_setzero_ps();
    }
    const __m512i first_index = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i two = _mm512_set1_epi32(2);
    for (int64_t g = 0; g < nb; g += 16) {
      const int n = nb - g >= 16 ? 16 : static_cast<int>(nb - g);
      const __m512i heads =
          LoadBlockHeads<sizeof(Block)>(reinterpret_cast<const uint8_t*>(blocks + g), n);
      const __m512 wd = _mm512_cvtph_ps(_mm512_castsi512_si256(heads));
      __m512 scale[N];
      for (int t = 0; t < N; ++t) {
        scale[t] =
            _mm512_mul_ps(wd, _mm512_loadu_ps(reinterpret_cast<const float*>(xq[t] + cols) + g));
      }
      __m512i index = first_index;
      int p = 0;
      for (; 2 * p + 3 < n; p += 2) {
        Pair<N>(blocks, g + 2 * p, true, index, scale, xq, acc0);
        index = _mm512_add_epi32(index, two);
        Pair<N>(blocks, g + 2 * p + 2, true, index, scale, xq, acc1);
        index = _mm512_add_epi32(index, two);
      }
      if (2 * p + 1 < n) {
        Pair<N>(blocks, g + 2 * p, true, index, scale, xq, acc0);
        index = _mm512_add_epi32(index, two);
        p += 1;
      }
      if (2 * p < n) Pair<N>(blocks, g + 2 * p, false, index, scale, xq, acc1);
      if constexpr (kQuantBias<kType, kVnni> != 0.0f) {
        const __m512 bias = _mm512_set1_ps(-kQuantBias<kType, kVnni>);
        for (int t = 0; t < N; ++t) {
          const __m512 sum =
              _mm512_loadu_ps(reinterpret_cast<const float*>(xq[t] + cols) + 2 * padded + g);
          acc0[t] = _mm512_fmadd_ps(scale[t], _mm512_mul_ps(sum, bias), acc0[t]);
        }
      }
    }
    for (int t = 0; t < N; ++t) tile.y[t][r] = HorizontalSum(_mm512_add_ps(acc0[t], acc1[t]));
  }
};

template <bool kVnni>
void MatMulRowsAvx512Impl(GgmlType weight_type, const void* w, int64_t cols,
                          const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                          int64_t y_stride) {
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
      return ForEachRowAndTile(Block32Kernel<GgmlType::kQ4_0, kVnni>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ4_1:
      return RowsByGroups(weight_type, kVnni ? Q4_1GroupAvx512Vnni : Q4_1GroupAvx512, w, cols, x,
                          row_begin, row_end, y, y_stride);
    case GgmlType::kQ8_0:
      return RowsByGroups(weight_type, kVnni ? Q8_0GroupAvx512Vnni : Q8_0GroupAvx512, w, cols, x,
                          row_begin, row_end, y, y_stride);
    default:
      if constexpr (kVnni) {
        return MatMulRowsKQuantsAvx512Vnni(weight_type, w, cols, x, row_begin, row_end, y,
                                           y_stride);
      }
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
