// AVX2 matmul path for the K-quants (Q4_K, Q5_K, Q6_K) against 256-element int8
// activation blocks: the AVX-512 algorithm (matmul_kquants_avx512.cc) at 32 elements
// per register. Per super-block and token: vpmaddubsw + vpmaddwd with the sub-block
// scale give 8 exact int32 partial sums, converted and FMA'd with d_w * d_x.
#include <immintrin.h>

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

// Quants of a super-block 32 at a time in element order, with int16 scales lined up
// with vpmaddubsw's output lanes and the weights of the activation sums per 16.
struct UnpackedSuperBlock {
  __m256i q[8];
  __m256i scales[8];
  __m256i sum_weights;  // int16 x 16
  float d;
  float d_correction;  // Q4_K / Q5_K: dmin (subtracted); Q6_K: unused
};

inline void UnpackK4(uint16_t d, uint16_t dmin, const uint8_t* packed_scales, const uint8_t* qs,
                     const uint8_t* qh, UnpackedSuperBlock* out) {
  uint64_t scales, mins;
  UnpackScalesMinsK4(packed_scales, &scales, &mins);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i bits = qh != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh))
                                     : _mm256_setzero_si256();
  for (int s = 0; s < 8; ++s) {
    out->scales[s] = _mm256_set1_epi16(static_cast<int16_t>((scales >> (8 * s)) & 0xFF));
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (s / 2)));
    __m256i q = _mm256_and_si256(s % 2 == 0 ? v : _mm256_srli_epi16(v, 4), low_mask);
    if (qh != nullptr) {
      const __m256i select = _mm256_set1_epi8(static_cast<char>(1 << s));
      const __m256i high = _mm256_cmpeq_epi8(_mm256_and_si256(bits, select), select);
      q = _mm256_or_si256(q, _mm256_and_si256(high, _mm256_set1_epi8(16)));
    }
    out->q[s] = q;
  }
  const __m128i min16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)));
  out->sum_weights =
      _mm256_set_m128i(_mm_unpackhi_epi16(min16, min16), _mm_unpacklo_epi16(min16, min16));
  out->d = Fp16ToFloat(d);
  out->d_correction = Fp16ToFloat(dmin);
}

inline void UnpackQ6_K(const BlockQ6_K& block, UnpackedSuperBlock* out) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const __m256i high_mask = _mm256_set1_epi8(0x30);
  for (int half = 0; half < 2; ++half) {
    const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.ql + 64 * half));
    const __m256i l1 =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.ql + 64 * half + 32));
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + 32 * half));
    // 16-bit shifts leak bits across bytes only outside the 0x30 mask.
    out->q[4 * half + 0] = _mm256_or_si256(_mm256_and_si256(l0, low_mask),
                                           _mm256_and_si256(_mm256_slli_epi16(h, 4), high_mask));
    out->q[4 * half + 1] = _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                                           _mm256_and_si256(_mm256_slli_epi16(h, 2), high_mask));
    out->q[4 * half + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                                           _mm256_and_si256(h, high_mask));
    out->q[4 * half + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                                           _mm256_and_si256(_mm256_srli_epi16(h, 2), high_mask));
  }
  for (int k = 0; k < 8; ++k) {
    out->scales[k] = _mm256_set_m128i(_mm_set1_epi16(block.scales[2 * k + 1]),
                                      _mm_set1_epi16(block.scales[2 * k]));
  }
  out->sum_weights =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
  out->d = Fp16ToFloat(block.d);
  out->d_correction = 0.0f;
}

template <GgmlType kType>
struct KQuantKernel {
  int64_t cols;
  static constexpr int kTile = 8;

  template <int N>
  void Run(const uint8_t* row, int64_t r, const TokenTile& tile) const {
    __m256 acc[N], acc_min[N];
    for (int t = 0; t < N; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
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
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 8; ++k) {
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * k));
          isum = _mm256_add_epi32(isum,
                                  _mm256_madd_epi16(_mm256_maddubs_epi16(w.q[k], xq), w.scales[k]));
        }
        const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.sums16));
        const __m256i correction = _mm256_madd_epi16(w.sum_weights, sums16);
        if constexpr (kType == GgmlType::kQ6_K) {
          isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(correction, 5));
        } else {
          acc_min[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(correction),
                                       _mm256_set1_ps(w.d_correction * x.d), acc_min[t]);
        }
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(w.d * x.d), acc[t]);
      }
    }
    for (int t = 0; t < N; ++t) tile.y[t][r] = HorizontalSum(acc[t]) - HorizontalSum(acc_min[t]);
  }
};

}  // namespace

void MatMulRowsKQuantsAvx2(GgmlType weight_type, const void* w, int64_t cols,
                           const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                           int64_t y_stride) {
  switch (weight_type) {
    case GgmlType::kQ4_K:
      return ForEachRowAndTile(KQuantKernel<GgmlType::kQ4_K>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ5_K:
      return ForEachRowAndTile(KQuantKernel<GgmlType::kQ5_K>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    case GgmlType::kQ6_K:
      return ForEachRowAndTile(KQuantKernel<GgmlType::kQ6_K>{cols}, weight_type, w, cols, x,
                               row_begin, row_end, y, y_stride);
    default:
      __builtin_trap();  // programmer error: MatMulRows only routes K-quants here
  }
}

}  // namespace splitspec::kernels::internal
