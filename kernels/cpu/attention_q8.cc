// q8_0 quantization of KV rows, the scalar reference of the q8_0 attention order
// (attention_q8.h) and the dispatch.
#include "kernels/cpu/attention_q8.h"

#include <cmath>

#include "kernels/cpu/attention_q8_impl.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

// The header's s_j, one position at a time.
void ScoresReference(const int8_t* qq, const float* dq, int n, float scale,
                     const KvBlockQ8Rows& rows, int head_dim, float* s) {
  for (int j = 0; j < n; ++j) {
    float chain = 0.0f;
    for (int b = 0; b < head_dim / kQ8BlockValues; ++b) {
      int32_t isum = 0;
      for (int d = b * kQ8BlockValues; d < (b + 1) * kQ8BlockValues; ++d) {
        isum += static_cast<int32_t>(qq[d]) *
                static_cast<int32_t>(rows.kq[(d / 4) * (4 * kKvBlockPositions) + j * 4 + d % 4]);
      }
      const float dk = Fp16ToFloat(rows.kd[b * kKvBlockPositions + j]);
      chain = std::fma(static_cast<float>(isum), dq[b] * dk, chain);
    }
    s[j] = chain * scale;
  }
}

bool HasVectorPath(int head_dim) { return head_dim % kQ8BlockValues == 0 && head_dim <= 256; }

}  // namespace

void QuantizeRowQ8_0(const float* x, int n, int8_t* quants, uint16_t* scales) {
  for (int b = 0; b < n / kQ8BlockValues; ++b) {
    const float* xb = x + b * kQ8BlockValues;
    float amax = 0.0f;
    for (int i = 0; i < kQ8BlockValues; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = FloatToFp16(d);
    for (int i = 0; i < kQ8BlockValues; ++i) {
      quants[b * kQ8BlockValues + i] = static_cast<int8_t>(std::roundf(xb[i] * id));
    }
  }
}

void QuantizeQueryQ8_0(const float* q, int head_dim, int8_t* qq, float* dq) {
  uint16_t dq_half[q8_internal::kMaxHeadDim / kQ8BlockValues];
  QuantizeRowQ8_0(q, head_dim, qq, dq_half);
  for (int b = 0; b < head_dim / kQ8BlockValues; ++b) dq[b] = Fp16ToFloat(dq_half[b]);
}

void AttendKvBlockQ8Reference(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                              int head_dim, float scale, float* partials) {
  q8_internal::AttendQ8(
      queries, count, head_dim, scale, partials,
      [&](const int8_t* qq, const float* dq, int n, float sc, float* s) {
        ScoresReference(qq, dq, n, sc, rows, head_dim, s);
      },
      [&](float* s, int n, int first, float* partial) {
        q8_internal::FinishPartialReference(s, n, first, rows, head_dim, partial);
      });
}

void AttendKvBlockQ8(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                     int head_dim, float scale, float* partials) {
#if defined(__x86_64__)
  const CpuFeatureSet& f = CpuFeatures();
  if (HasVectorPath(head_dim)) {
    if (f.avx512 && f.avx512_vnni) {
      return internal::AttendKvBlockQ8Avx512(queries, count, rows, head_dim, scale, partials);
    }
    if (f.avx2) return internal::AttendKvBlockQ8Avx2(queries, count, rows, head_dim, scale, partials);
  }
#endif
  AttendKvBlockQ8Reference(queries, count, rows, head_dim, scale, partials);
}

}  // namespace splitspec::kernels
