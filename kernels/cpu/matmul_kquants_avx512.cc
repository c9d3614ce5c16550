// AVX-512 matmul path for the K-quants (Q4_K, Q5_K, Q6_K) against 256-element int8
// activation blocks.
//
// Per super-block the weight quants are unpacked once into four registers of 64
// unsigned bytes in element order, and the sub-block scales into int16 lanes; per
// token, vpmaddubsw (quant * activation, pairs) then vpmaddwd (times the sub-block
// scale, pairs) give 16 exact int32 partial sums, which are converted and FMA'd with
// d_w * d_x into the token's accumulator. Mins (Q4_K, Q5_K) and Q6_K's -32 offset use
// the activation sums per 16. The order of operations depends only on `cols`.
//
// With VNNI, vpdpwssd does vpmaddwd's multiply and the following add in one instruction,
// and Q6_K's -32 offset (32 * scale * activation sum, per 16) starts the integer sum as
// one vpmaddwd against the scales times -32 instead of a shift and a subtraction after
// it. The integer sums are exact either way (no lane saturates or overflows: quants are
// below 64, activations within +-127, scales within +-127), so both variants give
// bitwise the same outputs; the VNNI one spends about a third fewer integer operations
// per token, which is what a multi-token tile pays per super-block.

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

inline float HorizontalSum(__m256 v) {
  __m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  v4 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
  v4 = _mm_add_ss(v4, _mm_shuffle_ps(v4, v4, 1));
  return _mm_cvtss_f32(v4);
}

// A super-block unpacked for the multiply: quants in element order 64 at a time,
// int16 scales lined up with vpmaddubsw's output lanes, and the correction vector
// that multiplies the activation sums per 16 (mins for Q4_K / Q5_K, scales for Q6_K).
struct UnpackedSuperBlock {
  __m512i q[4];
  __m512i scales[4];
  __m256i sum_weights;     // int16 x 16
  __m256i offset_weights;  // Q6_K: the scales times -32 (int16 x 16); unused otherwise
  float d;
  float d_correction;  // Q4_K / Q5_K: dmin (subtracted); Q6_K: unused (folded into ints)
};

// vpermw indices that spread int16 scales over vpmaddubsw's output lanes: register k
// (64 elements, 32 int16 lanes) takes scale first(k) + lane / run, with first(k) = k * 64 / (2 *
// run) (run 16: Q4_K / Q5_K scales per 32 elements; run 8: Q6_K scales per 16).
template <int kRun>
struct ScaleIndex {
  int16_t index[4][32] = {};
  constexpr ScaleIndex() {
    for (int k = 0; k < 4; ++k) {
      for (int lane = 0; lane < 32; ++lane)
        index[k][lane] = static_cast<int16_t>(k * 32 / kRun + lane / kRun);
    }
  }
};
template <int kRun>
alignas(64) inline constexpr ScaleIndex<kRun> kScaleIndex{};

inline __m512i ScaleIndexVector(const int16_t* index) { return _mm512_load_si512(index); }

// Q4_K / Q5_K: low nibbles of qs[32c..] are sub-block 2c, high nibbles 2c+1.
inline void UnpackK4(const uint16_t d, const uint16_t dmin, const uint8_t* packed_scales,
                     const uint8_t* qs, const uint8_t* qh, UnpackedSuperBlock* out) {
  uint64_t scales, mins;
  UnpackScalesMinsK4(packed_scales, &scales, &mins);
  const __m512i scale16 =
      _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales))));
  const __m128i min16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)));
  out->sum_weights =
      _mm256_set_m128i(_mm_unpackhi_epi16(min16, min16), _mm_unpacklo_epi16(min16, min16));
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  for (int half = 0; half < 2; ++half) {
    const __m512i v = _mm512_loadu_si512(qs + 64 * half);
    const __m512i lo = _mm512_and_si512(v, low_mask);  // [s0 | s2] of this half
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low_mask);        // [s1 | s3]
    out->q[2 * half] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));      // [s0 | s1]
    out->q[2 * half + 1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));  // [s2 | s3]
  }
  if (qh != nullptr) {
    const __m512i bits =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
    __m512i select = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
    for (int p = 0; p < 4; ++p) {
      const __mmask64 high = _mm512_test_epi8_mask(bits, select);
      out->q[p] = _mm512_mask_add_epi8(out->q[p], high, out->q[p], _mm512_set1_epi8(16));
      select = _mm512_slli_epi16(select, 2);  // bytes stay below 256: 1,2 -> 4,8 -> 16,32 -> 64,128
    }
  }
  for (int p = 0; p < 4; ++p)
    out->scales[p] = _mm512_permutexvar_epi16(ScaleIndexVector(kScaleIndex<16>.index[p]), scale16);
  out->d = Fp16ToFloat(d);
  out->d_correction = Fp16ToFloat(dmin);
}

inline void UnpackQ6_K(const BlockQ6_K& block, UnpackedSuperBlock* out) {
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  const __m512i high_mask = _mm512_set1_epi8(0x30);
  const __m512i shift_low = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shift_high = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
  for (int half = 0; half < 2; ++half) {
    const __m512i l = _mm512_loadu_si512(block.ql + 64 * half);
    const __m512i h = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + 32 * half)));
    // 16-bit shifts leak bits across bytes only outside the 0x30 mask.
    const __m512i high_of_low =
        _mm512_and_si512(_mm512_sllv_epi16(h, shift_low), high_mask);  // bits 0-1 | 2-3
    const __m512i high_of_high =
        _mm512_and_si512(_mm512_srlv_epi16(h, shift_high), high_mask);  // bits 4-5 | 6-7
    out->q[2 * half] = _mm512_or_si512(_mm512_and_si512(l, low_mask), high_of_low);
    out->q[2 * half + 1] =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low_mask), high_of_high);
  }
  const __m256i scale16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
  for (int k = 0; k < 4; ++k) {
    out->scales[k] = _mm512_permutexvar_epi16(ScaleIndexVector(kScaleIndex<8>.index[k]),
                                              _mm512_castsi256_si512(scale16));
  }
  out->sum_weights = scale16;
  out->offset_weights = _mm256_mullo_epi16(scale16, _mm256_set1_epi16(-32));
  out->d = Fp16ToFloat(block.d);
  out->d_correction = 0.0f;
}

// Exact integer sum over the super-block of scale * quant * activation, added to `sum`.
template <bool kVnni>
inline __m512i ScaledDot(const UnpackedSuperBlock& w, const ActivationBlock256& x, __m512i sum) {
  for (int k = 0; k < 4; ++k) {
    const __m512i xq = _mm512_loadu_si512(x.qs + 64 * k);
    const __m512i pairs = _mm512_maddubs_epi16(w.q[k], xq);
    if constexpr (kVnni) {
      sum = _mm512_dpwssd_epi32(sum, pairs, w.scales[k]);
    } else {
      sum = _mm512_add_epi32(sum, _mm512_madd_epi16(pairs, w.scales[k]));
    }
  }
  return sum;
}

template <GgmlType kType, bool kVnni>
struct KQuantKernel {
  int64_t cols;
  static constexpr int kTile = 9;

  template <int N>
  void Run(const uint8_t* row, int64_t r, const TokenTile& tile) const {
    __m512 acc[N];
    __m256 acc_min[N];
    for (int t = 0; t < N; ++t) {
      acc[t] = _mm512_setzero_ps();
      acc_min[t] = _mm256_setzero_ps();
    }
    UnpackedSuperBlock w;
    for (int64_t b = 0; b < cols / 256; ++b) {
      if constexpr (kType == GgmlType::kQ4_K) {
        const BlockQ4_K& block = reinterpret_cast<const BlockQ4_K*>(row)[b];
        UnpackK4(block.d, block.dmin, block.scales, block.qs, nullptr, &w);
      } else if constexpr (kType == GgmlType::kQ5_K) {
        const BlockQ5_K& block = reinterpret_cast<const BlockQ5_K*>(row)[b];
        UnpackK4(block.d, block.dmin, block.scales, block.qs, block.qh, &w);
      } else {
        UnpackQ6_K(reinterpret_cast<const BlockQ6_K*>(row)[b], &w);
      }
      for (int t = 0; t < N; ++t) {
        const ActivationBlock256& x = reinterpret_cast<const ActivationBlock256*>(tile.x[t])[b];
        const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sums16));
        __m512i isum;
        if constexpr (kType == GgmlType::kQ6_K && kVnni) {
          // Lanes 0-7: -32 * scale * activation sum, the same integers the shift removes.
          isum = ScaledDot<kVnni>(
              w, x, _mm512_zextsi256_si512(_mm256_madd_epi16(w.offset_weights, sums16)));
        } else {
          isum = ScaledDot<kVnni>(w, x, _mm512_setzero_si512());
        }
        const __m256i correction = _mm256_madd_epi16(w.sum_weights, sums16);  // 8 x int32
        if constexpr (kType == GgmlType::kQ6_K) {
          if constexpr (!kVnni) {
            isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(correction, 5)));
          }
        } else {
          acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(correction),
                                       _mm256_set1_ps(w.d_correction * x.d), acc_min[t]);
        }
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(w.d * x.d), acc[t]);
      }
    }
    for (int t = 0; t < N; ++t) tile.y[t][r] = HorizontalSum(acc[t]) - HorizontalSum(acc_min[t]);
  }
};

template <bool kVnni>
void MatMulRowsKQuantsAvx512Impl(GgmlType weight_type, const void* w, int64_t cols,
                                 const PackedActivations& x, int64_t row_begin, int64_t row_end,
                                 float* y, int64_t y_stride) {
  switch (weight_type) {
    case GgmlType::kQ4_K:
      return ForEachRowAndTile(KQuantKernel<GgmlType::kQ4_K, kVnni>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ5_K:
      return ForEachRowAndTile(KQuantKernel<GgmlType::kQ5_K, kVnni>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ6_K:
      return ForEachRowAndTile(KQuantKernel<GgmlType::kQ6_K, kVnni>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    default:
      __builtin_trap();  // programmer error: MatMulRows only routes K-quants here
  }
}

}  // namespace

void MatMulRowsKQuantsAvx512(GgmlType weight_type, const void* w, int64_t cols,
                             const PackedActivations& x, int64_t row_begin, int64_t row_end,
                             float* y, int64_t y_stride) {
  MatMulRowsKQuantsAvx512Impl<false>(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
}

void MatMulRowsKQuantsAvx512Vnni(GgmlType weight_type, const void* w, int64_t cols,
                                 const PackedActivations& x, int64_t row_begin, int64_t row_end,
                                 float* y, int64_t y_stride) {
  MatMulRowsKQuantsAvx512Impl<true>(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
}

}  // namespace splitspec::kernels::internal
