// The q8_0 attention order of attention_q8.h after the scores, as one inline function
// that each ISA's file compiles with its own flags (the loops over the head dimension
// vectorize; the float operations and their order are the header's in every build, so
// the paths agree bit for bit). Private to kernels/cpu/attention_q8*.cc.
#ifndef SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_IMPL_H_
#define SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_IMPL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_q8.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels::q8_internal {

inline constexpr int kMaxHeadDim = 256;
inline constexpr int kSumLanes = 16;

// scores(qq, dq, n, s): s[j] for j in [0, n) (the header's s_j, scale applied); s_j of
// masked positions (j < first) may be anything, they are overwritten.
template <typename Scores>
inline void AttendQ8(const KvBlockQuery* queries, int count, const KvBlockQ8Rows& rows,
                     int head_dim, float scale, float* partials, Scores scores) {
  const int blocks = head_dim / kQ8BlockValues;
  for (int i = 0; i < count; ++i) {
    const int n = queries[i].n;
    const int first = queries[i].first;
    alignas(64) int8_t qq[kMaxHeadDim];
    uint16_t dq_half[kMaxHeadDim / kQ8BlockValues];
    float dq[kMaxHeadDim / kQ8BlockValues];
    QuantizeRowQ8_0(queries[i].q, head_dim, qq, dq_half);
    for (int b = 0; b < blocks; ++b) dq[b] = Fp16ToFloat(dq_half[b]);
    alignas(64) float s[kKvBlockPositions];
    scores(qq, dq, n, scale, s);
    float m = -INFINITY;
    for (int j = first; j < n; ++j) m = std::max(m, s[j]);
    float lanes[kSumLanes] = {};
    for (int j = 0; j < n; ++j) {
      s[j] = j < first ? 0.0f : ExpApprox<GgmlOrder::kAvx512>(s[j] - m);  // e_j from here on
      lanes[j % kSumLanes] += s[j];
    }
    for (int half = kSumLanes / 2; half >= 1; half /= 2) {
      for (int l = 0; l < half; ++l) lanes[l] = lanes[l + half] + lanes[l];
    }
    float* partial = partials + i * KvBlockPartialFloats(head_dim);
    partial[0] = m;
    partial[1] = lanes[0];
    float* a = partial + 2;
    for (int d = 0; d < head_dim; ++d) a[d] = 0.0f;
    for (int j = 0; j < n; ++j) {  // a_d's chains, all d at once (each in increasing j)
      const float e = s[j];
      const int8_t* vq = rows.vq + j * rows.vq_stride;
      const uint16_t* vd = rows.vd + j * rows.vd_stride;
      for (int b = 0; b < blocks; ++b) {
        const float dv = Fp16ToFloat(vd[b]);
        float* ab = a + b * kQ8BlockValues;
        const int8_t* vb = vq + b * kQ8BlockValues;
        for (int k = 0; k < kQ8BlockValues; ++k) {
          ab[k] = std::fma(e, dv * static_cast<float>(vb[k]), ab[k]);
        }
      }
    }
  }
}

}  // namespace splitspec::kernels::q8_internal

#endif  // SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_IMPL_H_
