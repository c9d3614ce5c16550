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

// From the scores s[j] (j in [first, n); others ignored, s is overwritten with e_j) the
// partial {m, l, a} in the header's order, one position at a time.
inline void FinishPartialReference(float* s, int n, int first, const KvBlockQ8Rows& rows,
                                   int head_dim, float* partial) {
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
  partial[0] = m;
  partial[1] = lanes[0];
  float* a = partial + 2;
  for (int d = 0; d < head_dim; ++d) a[d] = 0.0f;
  for (int j = 0; j < n; ++j) {  // a_d's chains, all d at once (each in increasing j)
    const float e = s[j];
    const int8_t* vq = rows.vq + j * rows.vq_stride;
    const uint16_t* vd = rows.vd + j * rows.vd_stride;
    for (int b = 0; b < head_dim / kQ8BlockValues; ++b) {
      const float dv = Fp16ToFloat(vd[b]);
      float* ab = a + b * kQ8BlockValues;
      const int8_t* vb = vq + b * kQ8BlockValues;
      for (int k = 0; k < kQ8BlockValues; ++k) {
        ab[k] = std::fma(e, dv * static_cast<float>(vb[k]), ab[k]);
      }
    }
  }
}

// Every query of the tile: scores(qq, dq, n, scale, s) fills s[j] for j in [0, n) (the
// header's s_j, scale applied; masked positions may hold anything), then
// finish(s, n, first, partial).
template <typename Scores, typename Finish>
inline void AttendQ8(const KvBlockQueryQ8* queries, int count, int head_dim, float scale,
                     float* partials, Scores scores, Finish finish) {
  for (int i = 0; i < count; ++i) {
    alignas(64) float s[kKvBlockPositions];
    scores(queries[i].qq, queries[i].dq, queries[i].n, scale, s);
    finish(s, queries[i].n, queries[i].first, partials + i * KvBlockPartialFloats(head_dim));
  }
}

}  // namespace splitspec::kernels::q8_internal

#endif  // SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_IMPL_H_
