// The scalar reference of the block attention order (attention.h) and the dispatch.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::kernels {
namespace {

constexpr int kSumLanes = 16;

using Exp = float (*)(float);
constexpr Exp kExp = ExpApprox<GgmlOrder::kAvx512>;

void MergeReference(const float* partial, int head_dim, float* state) {
  const float m = std::max(state[0], partial[0]);
  const float x = kExp(state[0] - m);
  const float y = kExp(partial[0] - m);
  state[0] = m;
  state[1] = std::fma(state[1], x, partial[1] * y);
  for (int d = 0; d < head_dim; ++d) state[2 + d] = std::fma(state[2 + d], x, partial[2 + d] * y);
}

bool HasVectorPath(int head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

}  // namespace

void AttendKvBlockReference(const KvBlockQuery* queries, int count, const uint16_t* kt,
                            const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                            float* partials) {
  for (int i = 0; i < count; ++i) {
    const float* q = queries[i].q;
    const int n = queries[i].n;
    const int first = queries[i].first;
    float s[kKvBlockPositions];
    float m = -INFINITY;
    for (int j = 0; j < first; ++j) s[j] = -INFINITY;
    for (int j = first; j < n; ++j) {
      float chain = 0.0f;
      for (int d = 0; d < head_dim; ++d) {
        chain = std::fma(q[d], Fp16ToFloat(kt[d * kKvBlockPositions + j]), chain);
      }
      s[j] = chain * scale;
      m = std::max(m, s[j]);
    }
    float lanes[kSumLanes] = {};
    for (int j = 0; j < n; ++j) {
      s[j] = j < first ? 0.0f : kExp(s[j] - m);  // e_j from here on
      lanes[j % kSumLanes] += s[j];
    }
    for (int half = kSumLanes / 2; half >= 1; half /= 2) {
      for (int l = 0; l < half; ++l) lanes[l] = lanes[l + half] + lanes[l];
    }
    float* partial = partials + i * KvBlockPartialFloats(head_dim);
    partial[0] = m;
    partial[1] = lanes[0];
    for (int d = 0; d < head_dim; ++d) {
      float chain = 0.0f;
      for (int j = 0; j < n; ++j) chain = std::fma(s[j], Fp16ToFloat(v[j * v_stride + d]), chain);
      partial[2 + d] = chain;
    }
  }
}

void AttendKvBlock(const KvBlockQuery* queries, int count, const uint16_t* kt, const uint16_t* v,
                   int64_t v_stride, int head_dim, float scale, float* partials,
                   const KvBlockPrefetch& next) {
#if defined(__x86_64__)
  const CpuFeatureSet& f = CpuFeatures();
  if (HasVectorPath(head_dim)) {
    if (f.avx512) {
      return internal::AttendKvBlockAvx512(queries, count, kt, v, v_stride, head_dim, scale,
                                           partials, next);
    }
    if (f.avx2) {
      return internal::AttendKvBlockAvx2(queries, count, kt, v, v_stride, head_dim, scale,
                                         partials);
    }
  }
#endif
  AttendKvBlockReference(queries, count, kt, v, v_stride, head_dim, scale, partials);
}

void MergeKvBlockPartial(const float* partial, int head_dim, float* state) {
#if defined(__x86_64__)
  if (CpuFeatures().avx2 && head_dim % 8 == 0) {
    return internal::MergeKvBlockPartialAvx2(partial, head_dim, state);
  }
#endif
  MergeReference(partial, head_dim, state);
}

void FinishKvBlockPartials(const float* state, int head_dim, float* out) {
  const float l = state[1];
  for (int d = 0; d < head_dim; ++d) out[d] = state[2 + d] / l;
}

}  // namespace splitspec::kernels
