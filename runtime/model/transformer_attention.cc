// AttendOneHead (transformer_ops.h): one query against the cached keys and values,
// in llama.cpp's order of float operations for a prompt batch on x86 (ggml's CPU
// backend, no flash attention: F16 K*Q and V*P products through its tiled GEMM,
// ggml's softmax), in either of its x86 builds (kernels::GgmlOrder): the AVX-512
// build sums in 16 lanes, the AVX2 build in 8, and their expf differ in the last bit.
// Matching that order bit for bit matters: the 8-bit quantization of every matmul
// input turns last-bit differences into whole quantization steps, and those grow
// through the layers into logit differences that look like a different model
// (matmul.h, "Q4_1 order", says the same of matmuls).
//
// An "L-lane sum" (L = 16 or 8) of a sequence a_0, a_1, ... is: lane l accumulates
// a_i for i % L == l in increasing i (a fused multiply-add chain for products), then
// the lanes are folded in halves, x_i <- x_{i+h} + x_i for i < h, h = L/2, L/4, ..., 1
// (the hsum of ggml's 512-, 256- and 128-bit vectors).
//
//   s_j = L-lane sum over d of q_d * k_{j,d}, times scale       (q, k: half-precision values)
//   e_j = ExpApprox<order>(s_j - max_j s_j)
//   S   = sum over chunks c of L positions of (double) L-lane sum of e in c
//   p_j = half(e_j * (float)(1 / S))
//   out_d = L-lane sum over j of p_j * v_{j,d}                 (v: half-precision values)
//
// The scalar and the AVX2 paths perform exactly these operations and agree bitwise (the
// AVX2 path takes the 16-lane score chains and, for a group of queries, the value chains
// in AVX-512 registers where the CPU has them: the same operations, wider registers).
// AttendHeadGroup runs the queries sharing a KV head together, each with exactly these
// operations, reading each key and value row once for the group.
// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header; the values are fully written
// (as in kernels/cpu/matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model::internal {
namespace {

using kernels::GgmlOrder;

template <GgmlOrder kOrder>
constexpr int kLanes = kOrder == GgmlOrder::kAvx512 ? 16 : 8;

// Folds l[0, lanes) in halves (the header's lane tree) and returns the sum.
template <int kWidth>
float LaneTreeSum(float (&l)[kWidth]) {
  for (int half = kWidth / 2; half >= 1; half /= 2) {
    for (int i = 0; i < half; ++i) l[i] = l[i + half] + l[i];
  }
  return l[0];
}

template <GgmlOrder kOrder>
void AttendOneHeadReferenceT(const float* q, const float* keys, const float* values,
                             int64_t kv_stride, int pos, int head_dim, float scale, float* scratch,
                             float* out) {
  constexpr int L = kLanes<kOrder>;
  const int n = pos + 1;
  for (int j = 0; j < n; ++j) {
    const float* k = keys + j * kv_stride;
    float lanes[L] = {};
    for (int d = 0; d < head_dim; ++d) lanes[d % L] = std::fma(k[d], q[d], lanes[d % L]);
    scratch[j] = LaneTreeSum(lanes) * scale;
  }
  float max_score = scratch[0];
  for (int j = 1; j < n; ++j) max_score = std::max(max_score, scratch[j]);
  double sum = 0.0;
  for (int c = 0; c < n; c += L) {
    float lanes[L] = {};
    for (int j = c; j < std::min(n, c + L); ++j) {
      scratch[j] = kernels::ExpApprox<kOrder>(scratch[j] - max_score);
      lanes[j - c] = scratch[j];
    }
    sum += static_cast<double>(LaneTreeSum(lanes));
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int j = 0; j < n; ++j) scratch[j] = kernels::RoundToHalf(scratch[j] * inv_sum);
  for (int d = 0; d < head_dim; ++d) {
    float lanes[L] = {};
    for (int j = 0; j < n; ++j) {
      lanes[j % L] = std::fma(values[j * kv_stride + d], scratch[j], lanes[j % L]);
    }
    out[d] = LaneTreeSum(lanes);
  }
}

}  // namespace

void AttendOneHeadReference(GgmlOrder order, const float* q, const float* keys, const float* values,
                            int64_t kv_stride, int pos, int head_dim, float scale, float* scratch,
                            float* out) {
  if (order == GgmlOrder::kAvx512) {
    AttendOneHeadReferenceT<GgmlOrder::kAvx512>(q, keys, values, kv_stride, pos, head_dim, scale,
                                                scratch, out);
  } else {
    AttendOneHeadReferenceT<GgmlOrder::kAvx2>(q, keys, values, kv_stride, pos, head_dim, scale,
                                              scratch, out);
  }
}

#if defined(__x86_64__)
namespace {

// The lane tree of 8 lanes (ggml's hsum of a 256-bit vector).
__attribute__((target("avx2,fma"))) inline float LaneTreeSum8(__m256 x) {
  __m128 u = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
  u = _mm_add_ps(u, _mm_movehl_ps(u, u));  // u0 + u2, u1 + u3
  u = _mm_add_ss(u, _mm_movehdup_ps(u));   // (u0 + u2) + (u1 + u3)
  return _mm_cvtss_f32(u);
}

// The lane tree of 16 lanes given as (lo = lanes 0-7, hi = lanes 8-15).
__attribute__((target("avx2,fma"))) inline float LaneTreeSum16(__m256 lo, __m256 hi) {
  return LaneTreeSum8(_mm256_add_ps(hi, lo));
}

// The lane trees of eight 8-lane vectors at once: element i of the result is
// LaneTreeSum8(a[i]). The same additions of the same operands as LaneTreeSum8, done
// across vectors (with the operands transposed), so each element is bitwise equal.
__attribute__((target("avx2,fma"))) inline __m256 LaneTreeSum8x8(const __m256 (&a)[8]) {
  __m256 u[4];  // u[i] = [hi + lo of a[2i] | hi + lo of a[2i + 1]] (LaneTreeSum8's first add)
  for (int i = 0; i < 4; ++i) {
    u[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31),
                         _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20));
  }
  // w: per vector, u0 + u2 and u1 + u3 (the second add), two vectors per 128-bit half.
  const __m256 w01 = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 w23 = _mm256_add_ps(_mm256_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // The last add, (u0 + u2) + (u1 + u3): results for a[0, 2, 4, 6 | 1, 3, 5, 7].
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(w01, w23, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(w01, w23, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The score vectors of positions j0 .. j0 + kCount - 1 before their lane trees: each the
// L-lane chain of q * k_j folded to 8 lanes as LaneTreeSum16 does first (hi + lo), or
// the 8-lane chain itself. The positions' chains are interleaved (FMA latency).
template <int L, int kCount>
__attribute__((target("avx2,fma"))) inline void ScoreLanes(const float* q, const float* keys,
                                                           int64_t kv_stride, int j0, int head_dim,
                                                           __m256* out) {
  __m256 lo[kCount], hi[kCount];
  for (int i = 0; i < kCount; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += L) {
    const __m256 q_lo = _mm256_loadu_ps(q + d);
    const __m256 q_hi = L == 16 ? _mm256_loadu_ps(q + d + 8) : q_lo;
    for (int i = 0; i < kCount; ++i) {
      const float* k = keys + (j0 + i) * kv_stride + d;
      lo[i] = _mm256_fmadd_ps(_mm256_loadu_ps(k), q_lo, lo[i]);
      if constexpr (L == 16) hi[i] = _mm256_fmadd_ps(_mm256_loadu_ps(k + 8), q_hi, hi[i]);
    }
  }
  for (int i = 0; i < kCount; ++i) out[i] = L == 16 ? _mm256_add_ps(hi[i], lo[i]) : lo[i];
}

// scores[j, j + 8) = s_j of eight positions, their lane trees taken together.
template <int L>
__attribute__((target("avx2,fma"))) inline void ScoresOf8Avx2(const float* q, const float* keys,
                                                              int64_t kv_stride, int j,
                                                              int head_dim, float scale,
                                                              float* scores) {
  __m256 lanes8[8];
  ScoreLanes<L, 4>(q, keys, kv_stride, j, head_dim, lanes8);
  ScoreLanes<L, 4>(q, keys, kv_stride, j + 4, head_dim, lanes8 + 4);
  _mm256_storeu_ps(scores + j, _mm256_mul_ps(LaneTreeSum8x8(lanes8), _mm256_set1_ps(scale)));
}

// ScoresOf8Avx2<16> with AVX-512: a position's 16-lane chain is one 512-bit register
// (lanes 0-7 are the AVX2 code's lo, 8-15 its hi, with the same FMAs), half the
// instructions. REQUIRES: head_dim % 16 == 0.
__attribute__((target("avx512f,avx2,fma"))) inline void ScoresOf8Avx512(const float* q,
                                                                        const float* keys,
                                                                        int64_t kv_stride, int j,
                                                                        int head_dim, float scale,
                                                                        float* scores) {
  __m512 chains[8];
  for (int i = 0; i < 8; ++i) chains[i] = _mm512_setzero_ps();
  for (int d = 0; d < head_dim; d += 16) {
    const __m512 qd = _mm512_loadu_ps(q + d);
    for (int i = 0; i < 8; ++i) {
      chains[i] = _mm512_fmadd_ps(_mm512_loadu_ps(keys + (j + i) * kv_stride + d), qd, chains[i]);
    }
  }
  __m256 lanes8[8];
  for (int i = 0; i < 8; ++i) {
    const __m512 hi = _mm512_shuffle_f32x4(chains[i], chains[i], _MM_SHUFFLE(3, 2, 3, 2));
    lanes8[i] = _mm256_add_ps(_mm512_castps512_ps256(hi), _mm512_castps512_ps256(chains[i]));
  }
  _mm256_storeu_ps(scores + j, _mm256_mul_ps(LaneTreeSum8x8(lanes8), _mm256_set1_ps(scale)));
}

// ScoresOf8Avx2<L>, through ScoresOf8Avx512 where it applies (16 lanes, AVX-512).
template <int L>
__attribute__((target("avx2,fma"))) inline void ScoresOf8(const float* q, const float* keys,
                                                          int64_t kv_stride, int j, int head_dim,
                                                          float scale, float* scores) {
  static const bool avx512 = kernels::CpuFeatures().avx512;
  if (L == 16 && avx512) return ScoresOf8Avx512(q, keys, kv_stride, j, head_dim, scale, scores);
  ScoresOf8Avx2<L>(q, keys, kv_stride, j, head_dim, scale, scores);
}

// Lanes [0, n) of 8 (n clamped to [0, 8]) as a maskload mask.
__attribute__((target("avx2"))) inline __m256i FirstLanes(int n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), index);
}

// exp(scratch[c + i] - max) for the first n - c lanes of 8 (zero past n, as
// llama.cpp's masked positions are), stored back; returns the vector.
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma"))) inline __m256 ExpChunk8(float* scratch, int c, int n,
                                                            __m256 vmax) {
  const __m256i mask = FirstLanes(n - c);
  const __m256 e = _mm256_and_ps(
      kernels::ExpApprox8<kOrder>(_mm256_sub_ps(_mm256_maskload_ps(scratch + c, mask), vmax)),
      _mm256_castsi256_ps(mask));
  _mm256_maskstore_ps(scratch + c, mask, e);
  return e;
}

constexpr int kMaxHeadDim = 256;

// scores[j] = s_j (the header's first line) for j in [j_begin, n): eight positions at
// a time from j_begin (a multiple of 8), the rest one by one.
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma"))) void ScoresAvx2(const float* q, const float* keys,
                                                    int64_t kv_stride, int j_begin, int n,
                                                    int head_dim, float scale, float* scores) {
  constexpr int L = kLanes<kOrder>;
  int j = j_begin;
  for (; j + 8 <= n; j += 8) ScoresOf8<L>(q, keys, kv_stride, j, head_dim, scale, scores);
  for (; j < n; ++j) {
    __m256 lanes;
    ScoreLanes<L, 1>(q, keys, kv_stride, j, head_dim, &lanes);
    scores[j] = LaneTreeSum8(lanes) * scale;
  }
}

// The largest of scores[0, n) exactly as the sequential std::max loop finds it: vector
// maxima, unless a NaN or a zero maximum (whose sign the loop's order decides) calls for
// the loop itself.
__attribute__((target("avx2"))) inline float MaxScore(const float* scores, int n) {
  float max_score = scores[0];
  int j = 1;
  if (n >= 16) {
    __m256 vmax = _mm256_loadu_ps(scores);
    __m256 unordered = _mm256_cmp_ps(vmax, vmax, _CMP_UNORD_Q);
    for (j = 8; j + 8 <= n; j += 8) {
      const __m256 x = _mm256_loadu_ps(scores + j);
      vmax = _mm256_max_ps(vmax, x);
      unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vmax);
    for (float lane : lanes) max_score = std::max(max_score, lane);
    if (_mm256_movemask_ps(unordered) != 0 || max_score == 0.0f) {
      max_score = scores[0];
      j = 1;
    }
  }
  for (; j < n; ++j) max_score = std::max(max_score, scores[j]);
  return max_score;
}

// scratch[0, n): the scores in, the half-precision probabilities p_j out (the header's
// second to fourth lines).
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma,f16c"))) void ProbabilitiesAvx2(float* scratch, int n) {
  constexpr int L = kLanes<kOrder>;
  const float max_score = MaxScore(scratch, n);
  const __m256 vmax = _mm256_set1_ps(max_score);
  double sum = 0.0;
  for (int c = 0; c < n; c += L) {
    const __m256 e_lo = ExpChunk8<kOrder>(scratch, c, n, vmax);
    if constexpr (L == 16) {
      sum += static_cast<double>(LaneTreeSum16(e_lo, ExpChunk8<kOrder>(scratch, c + 8, n, vmax)));
    } else {
      sum += static_cast<double>(LaneTreeSum8(e_lo));
    }
  }
  const __m256 inv_sum = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int c = 0; c < n; c += 8) {
    const __m256i mask = FirstLanes(n - c);
    const __m256 p = _mm256_mul_ps(_mm256_maskload_ps(scratch + c, mask), inv_sum);
    _mm256_maskstore_ps(scratch + c, mask,
                        _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT)));
  }
}

// out[d] = the L-lane sum over positions j < n of p[j] * v_{j,d} (the header's last line).
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma"))) void WeightedValuesAvx2(const float* values, int64_t kv_stride,
                                                            const float* p, int n, int head_dim,
                                                            float* out) {
  constexpr int L = kLanes<kOrder>;
  // lanes[l][d]: the chain of positions j % L == l for output element d.
  alignas(32) float lanes[L][kMaxHeadDim];
  const int used = std::min(n, L);
  for (int l = 0; l < used; ++l) std::memset(lanes[l], 0, head_dim * sizeof(float));
  for (int j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const float* v = values + j * kv_stride;
    float* lane = lanes[j % L];
    for (int d = 0; d < head_dim; d += 8) {
      _mm256_store_ps(lane + d,
                      _mm256_fmadd_ps(_mm256_loadu_ps(v + d), pj, _mm256_load_ps(lane + d)));
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += 8) {
    __m256 l[L];
    for (int i = 0; i < L; ++i) l[i] = i < used ? _mm256_load_ps(lanes[i] + d) : zero;
    for (int half = L / 2; half >= 1; half /= 2) {
      for (int i = 0; i < half; ++i) l[i] = _mm256_add_ps(l[i + half], l[i]);
    }
    _mm256_storeu_ps(out + d, l[0]);
  }
}

// WeightedValuesAvx2's result from values repacked 16 elements wide: packed[b][j][16] =
// v_{j, 16 b .. 16 b + 15} for j < n_packed. The L lane chains of a 16-element column
// block stay in registers (AVX-512 has room for them) and the packed column block is
// contiguous, so the queries of a group reuse it from L1. The same FMAs and additions of
// the same operands as WeightedValuesAvx2, so bitwise the same. REQUIRES: n <= n_packed.
template <int L>
__attribute__((target("avx512f"))) void WeightedPackedValuesAvx512(const float* packed,
                                                                   int n_packed, const float* p,
                                                                   int n, int head_dim,
                                                                   float* out) {
  for (int d = 0; d < head_dim; d += 16) {
    const float* v = packed + static_cast<int64_t>(d) * n_packed;
    __m512 lanes[L];
    for (int l = 0; l < L; ++l) lanes[l] = _mm512_setzero_ps();
    int j = 0;
    for (; j + L <= n; j += L) {
      for (int l = 0; l < L; ++l) {
        lanes[l] =
            _mm512_fmadd_ps(_mm512_loadu_ps(v + 16 * (j + l)), _mm512_set1_ps(p[j + l]), lanes[l]);
      }
    }
    for (int l = 0; l < L; ++l) {  // the last n % L positions
      if (j + l < n) {
        lanes[l] =
            _mm512_fmadd_ps(_mm512_loadu_ps(v + 16 * (j + l)), _mm512_set1_ps(p[j + l]), lanes[l]);
      }
    }
    for (int half = L / 2; half >= 1; half /= 2) {
      for (int i = 0; i < half; ++i) lanes[i] = _mm512_add_ps(lanes[i + half], lanes[i]);
    }
    _mm512_storeu_ps(out + d, lanes[0]);
  }
}

// packed[b][j][16] = v_{j, 16 b .. 16 b + 15} for j < n (WeightedPackedValuesAvx512).
inline void PackValues(const float* values, int64_t kv_stride, int n, int head_dim, float* packed) {
  for (int b = 0; b < head_dim / 16; ++b) {
    float* column = packed + static_cast<int64_t>(b) * 16 * n;
    for (int j = 0; j < n; ++j) {
      std::memcpy(column + 16 * j, values + j * kv_stride + 16 * b, 16 * sizeof(float));
    }
  }
}

// REQUIRES: head_dim % 16 == 0, head_dim <= kMaxHeadDim.
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma,f16c"))) void AttendOneHeadAvx2(const float* q, const float* keys,
                                                                const float* values,
                                                                int64_t kv_stride, int pos,
                                                                int head_dim, float scale,
                                                                float* scratch, float* out) {
  const int n = pos + 1;
  ScoresAvx2<kOrder>(q, keys, kv_stride, 0, n, head_dim, scale, scratch);
  ProbabilitiesAvx2<kOrder>(scratch, n);
  WeightedValuesAvx2<kOrder>(values, kv_stride, scratch, n, head_dim, out);
}

// AttendHeadGroup's fast path. REQUIRES: as AttendOneHeadAvx2.
template <GgmlOrder kOrder>
__attribute__((target("avx2,fma,f16c"))) void AttendHeadGroupAvx2(
    const AttentionQuery* queries, int count, const float* keys, const float* values,
    int64_t kv_stride, int head_dim, float scale, std::vector<float>* scratch) {
  int n_max = 0;
  for (int i = 0; i < count; ++i) n_max = std::max(n_max, queries[i].pos + 1);
  static const bool avx512 = kernels::CpuFeatures().avx512;
  const int64_t packed_size = avx512 ? static_cast<int64_t>(n_max) * head_dim : 0;
  const int64_t needed = static_cast<int64_t>(count) * n_max + packed_size;
  if (static_cast<int64_t>(scratch->size()) < needed) scratch->resize(needed);
  float* scores = scratch->data();  // [count][n_max]
  // Positions in chunks of 8, every query of the group against a chunk of keys while
  // it is in L1; then each query's last n % 8 positions.
  for (int j = 0; j + 8 <= n_max; j += 8) {
    for (int i = 0; i < count; ++i) {
      if (j + 8 <= queries[i].pos + 1) {
        ScoresOf8<kLanes<kOrder>>(queries[i].q, keys, kv_stride, j, head_dim, scale,
                                  scores + static_cast<int64_t>(i) * n_max);
      }
    }
  }
  for (int i = 0; i < count; ++i) {
    const int n = queries[i].pos + 1;
    float* p = scores + static_cast<int64_t>(i) * n_max;
    ScoresAvx2<kOrder>(queries[i].q, keys, kv_stride, n / 8 * 8, n, head_dim, scale, p);
    ProbabilitiesAvx2<kOrder>(p, n);
  }
  if (!avx512) {
    for (int i = 0; i < count; ++i) {
      WeightedValuesAvx2<kOrder>(values, kv_stride, scores + static_cast<int64_t>(i) * n_max,
                                 queries[i].pos + 1, head_dim, queries[i].out);
    }
    return;
  }
  float* packed = scores + static_cast<int64_t>(count) * n_max;
  PackValues(values, kv_stride, n_max, head_dim, packed);
  for (int i = 0; i < count; ++i) {
    WeightedPackedValuesAvx512<kLanes<kOrder>>(packed, n_max,
                                               scores + static_cast<int64_t>(i) * n_max,
                                               queries[i].pos + 1, head_dim, queries[i].out);
  }
}

}  // namespace
#endif

void AttendOneHead(GgmlOrder order, const float* q, const float* keys, const float* values,
                   int64_t kv_stride, int pos, int head_dim, float scale, float* scratch,
                   float* out) {
#if defined(__x86_64__)
  static const bool avx2 = kernels::CpuFeatures().avx2;
  if (avx2 && head_dim % 16 == 0 && head_dim <= kMaxHeadDim) {
    if (order == GgmlOrder::kAvx512) {
      AttendOneHeadAvx2<GgmlOrder::kAvx512>(q, keys, values, kv_stride, pos, head_dim, scale,
                                            scratch, out);
    } else {
      AttendOneHeadAvx2<GgmlOrder::kAvx2>(q, keys, values, kv_stride, pos, head_dim, scale, scratch,
                                          out);
    }
    return;
  }
#endif
  AttendOneHeadReference(order, q, keys, values, kv_stride, pos, head_dim, scale, scratch, out);
}

void AttendHeadGroup(GgmlOrder order, const AttentionQuery* queries, int count, const float* keys,
                     const float* values, int64_t kv_stride, int head_dim, float scale,
                     std::vector<float>* scratch) {
#if defined(__x86_64__)
  static const bool avx2 = kernels::CpuFeatures().avx2;
  if (count > 1 && avx2 && head_dim % 16 == 0 && head_dim <= kMaxHeadDim) {
    if (order == GgmlOrder::kAvx512) {
      AttendHeadGroupAvx2<GgmlOrder::kAvx512>(queries, count, keys, values, kv_stride, head_dim,
                                              scale, scratch);
    } else {
      AttendHeadGroupAvx2<GgmlOrder::kAvx2>(queries, count, keys, values, kv_stride, head_dim,
                                            scale, scratch);
    }
    return;
  }
#endif
  for (int i = 0; i < count; ++i) {
    if (static_cast<int>(scratch->size()) < queries[i].pos + 1) scratch->resize(queries[i].pos + 1);
    AttendOneHead(order, queries[i].q, keys, values, kv_stride, queries[i].pos, head_dim, scale,
                  scratch->data(), queries[i].out);
  }
}

}  // namespace splitspec::model::internal
