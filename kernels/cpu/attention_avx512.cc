// AVX-512 path of the block attention order (attention.h). Up to four queries (a decode
// step's GQA heads) form a tile: its score chains are 4 queries x 4 vectors of 16
// positions, its value chains 4 queries x 64 output elements, all in registers, so each
// key and value vector converted from half precision feeds 16 FMAs. Five to sixteen
// queries (a verification block's tokens x heads, a prefill tile's part) form a wide
// tile, which runs the loops the other way round: one vector of 16 positions or output
// elements at a time against all its queries (kCount chains, each vector read and
// converted once per tile). More than sixteen: wide tiles of near-equal sizes, the block's
// rows read from memory once, by the first tile, and from cache by the others. The first
// tile also prefetches the caller's next block into L2 (measured on the 2-core EPYC:
// decode-shaped blocks otherwise wait on each cache miss in turn). The same float
// operations as the reference, so the same bits.
// GCC 12's AVX-512 intrinsic headers seed some results with _mm512_undefined_*, which
// -W(maybe-)uninitialized reports inside the header (as in matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_exp_avx512.h"

namespace splitspec::kernels::internal {
namespace {

constexpr int kVectors = kKvBlockPositions / 16;  // 4 vectors of 16 positions
constexpr int kTile = 4;                          // queries sharing each converted vector
constexpr int kDimTile = 64;                      // output elements per pass of the value chains
constexpr int kMinWideTile = kTile + 1;           // fewer: AttendTile (too few chains per vector)
constexpr int kMaxWideTile = 16;  // the registers: kMaxWideTile chains + the row vector
constexpr int kMaxHeadDim = 256;  // the largest head_dim AttendKvBlock dispatches here

inline __m512 LoadHalves16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The 16-lane sum (attention.h): vector c holds positions 16c .. 16c + 15, lane i of
// each the positions j % 16 == i; then the folds h = 8, 4, 2, 1.
inline float SixteenLaneSum(const __m512 (&e)[kVectors]) {
  __m512 lanes = _mm512_setzero_ps();
  for (int c = 0; c < kVectors; ++c) lanes = _mm512_add_ps(lanes, e[c]);
  const __m256 x8 =
      _mm256_add_ps(_mm512_extractf32x8_ps(lanes, 1), _mm512_castps512_ps256(lanes));  // h = 8
  __m128 u = _mm_add_ps(_mm256_extractf128_ps(x8, 1), _mm256_castps256_ps128(x8));     // h = 4
  u = _mm_add_ps(u, _mm_movehl_ps(u, u));                                              // h = 2
  u = _mm_add_ss(u, _mm_movehdup_ps(u));                                               // h = 1
  return _mm_cvtss_f32(u);
}

// The softmax of queries [0, kCount) (attention.h's m, e_j and l) from their score
// chains s (lanes of vector c: positions 16c .. 16c + 15), each step across the queries
// so that their dependency chains overlap. e_j goes to e[g * kKvBlockPositions + j]
// (0 where query g does not attend to j), m and l to partials[g * partial_stride].
template <int kCount>
inline void Softmax(const KvBlockQuery* queries, __m512 (&s)[kCount][kVectors], float scale,
                    float* e, float* partials, int64_t partial_stride) {
  __mmask16 valid[kCount][kVectors];
  __m512 vmax[kCount];
  for (int g = 0; g < kCount; ++g) {
    vmax[g] = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < kVectors; ++c) {
      const int in_vector = std::clamp(queries[g].n - 16 * c, 0, 16);
      const int masked = std::clamp(queries[g].first - 16 * c, 0, 16);  // before `first`
      valid[g][c] = static_cast<__mmask16>(((1u << in_vector) - 1u) & ~((1u << masked) - 1u));
    }
  }
  for (int c = 0; c < kVectors; ++c) {
    for (int g = 0; g < kCount; ++g) {
      s[g][c] = _mm512_mask_mul_ps(_mm512_set1_ps(-INFINITY), valid[g][c], s[g][c],
                                   _mm512_set1_ps(scale));
      vmax[g] = _mm512_max_ps(vmax[g], s[g][c]);
    }
  }
  float m[kCount];
  for (int g = 0; g < kCount; ++g) m[g] = _mm512_reduce_max_ps(vmax[g]);
  __m512 x[kCount * kVectors];
  for (int g = 0; g < kCount; ++g) {
    for (int c = 0; c < kVectors; ++c) {
      x[g * kVectors + c] = _mm512_sub_ps(s[g][c], _mm512_set1_ps(m[g]));
    }
  }
  ExpOfNonPositive16(x);  // x <= 0: each s_j <= m
  for (int g = 0; g < kCount; ++g) {
    for (int c = 0; c < kVectors; ++c) {
      s[g][c] = _mm512_maskz_mov_ps(valid[g][c], x[g * kVectors + c]);
      _mm512_store_ps(e + g * kKvBlockPositions + 16 * c, s[g][c]);
    }
    float* partial = partials + g * partial_stride;
    partial[0] = m[g];
    partial[1] = SixteenLaneSum(s[g]);
  }
}

// Prefetches [p, p + halves) into L2 (a hint: no effect on results). Into L2, not L1:
// a block and the next one fill L1, and prefetching into L1 made decode slower.
inline void PrefetchHalves(const uint16_t* p, int halves) {
  const char* first = reinterpret_cast<const char*>(p);
  const char* last = reinterpret_cast<const char*>(p + halves) - 1;
  for (const char* line = first; line <= last; line += 64) _mm_prefetch(line, _MM_HINT_T1);
  _mm_prefetch(last, _MM_HINT_T1);  // the last line when p is not line-aligned
}

// Queries [0, kCount) of a tile; kCount <= kTile. When next.kt is set, the first tile of
// a block prefetches the next block's rows while it reads this one's (one key row per
// score step, one value row per value step), so the cache misses of the next block
// overlap this block's arithmetic.
template <int kCount>
void AttendTile(const KvBlockQuery* queries, const uint16_t* kt, const uint16_t* v,
                int64_t v_stride, int head_dim, float scale, const KvBlockPrefetch& next,
                float* partials) {
  int n_max = 0, n_min = kKvBlockPositions;
  for (int g = 0; g < kCount; ++g) {
    n_max = std::max(n_max, queries[g].n);
    n_min = std::min(n_min, queries[g].n);
  }
  const int used = (n_max + 15) / 16;
  // Score chains: s[g][c] lanes = positions 16c .. 16c + 15 of query g.
  __m512 s[kCount][kVectors];
  for (int g = 0; g < kCount; ++g) {
    for (int c = 0; c < kVectors; ++c) s[g][c] = _mm512_setzero_ps();
  }
  const bool prefetch_keys = next.kt != nullptr;
  if (used == kVectors) {
    for (int d = 0; d < head_dim; ++d) {
      const uint16_t* row = kt + d * kKvBlockPositions;
      if (prefetch_keys) PrefetchHalves(next.kt + d * kKvBlockPositions, kKvBlockPositions);
      __m512 k[kVectors];
      for (int c = 0; c < kVectors; ++c) k[c] = LoadHalves16(row + 16 * c);
      for (int g = 0; g < kCount; ++g) {
        const __m512 qd = _mm512_set1_ps(queries[g].q[d]);
        for (int c = 0; c < kVectors; ++c) s[g][c] = _mm512_fmadd_ps(qd, k[c], s[g][c]);
      }
    }
  } else {  // a last, partial block: only the vectors holding attended positions
    for (int d = 0; d < head_dim; ++d) {
      const uint16_t* row = kt + d * kKvBlockPositions;
      if (prefetch_keys) PrefetchHalves(next.kt + d * kKvBlockPositions, kKvBlockPositions);
      for (int c = 0; c < used; ++c) {
        const __m512 k = LoadHalves16(row + 16 * c);
        for (int g = 0; g < kCount; ++g) {
          s[g][c] = _mm512_fmadd_ps(_mm512_set1_ps(queries[g].q[d]), k, s[g][c]);
        }
      }
    }
  }
  alignas(64) float e[kCount][kKvBlockPositions];
  Softmax<kCount>(queries, s, scale, e[0], partials, KvBlockPartialFloats(head_dim));
  const bool prefetch_values = next.v != nullptr && next.rows > 0;
  for (int d0 = 0; d0 < head_dim; d0 += kDimTile) {
    __m512 a[kCount][kDimTile / 16];
    for (int g = 0; g < kCount; ++g) {
      for (auto& y : a[g]) y = _mm512_setzero_ps();
    }
    // This pass's columns of the next block's rows, one row per step.
    const int prefetch_rows = prefetch_values ? next.rows : 0;
    int j = 0;
    for (; j < n_min; ++j) {  // every query of the tile attends to j
      if (j < prefetch_rows) PrefetchHalves(next.v + j * v_stride + d0, kDimTile);
      const uint16_t* row = v + j * v_stride + d0;
      __m512 vr[kDimTile / 16];
      for (int c = 0; c < kDimTile / 16; ++c) vr[c] = LoadHalves16(row + 16 * c);
      for (int g = 0; g < kCount; ++g) {
        const __m512 ej = _mm512_set1_ps(e[g][j]);
        for (int c = 0; c < kDimTile / 16; ++c) a[g][c] = _mm512_fmadd_ps(ej, vr[c], a[g][c]);
      }
    }
    for (; j < n_max; ++j) {
      const uint16_t* row = v + j * v_stride + d0;
      __m512 vr[kDimTile / 16];
      for (int c = 0; c < kDimTile / 16; ++c) vr[c] = LoadHalves16(row + 16 * c);
      for (int g = 0; g < kCount; ++g) {
        if (j >= queries[g].n) continue;
        const __m512 ej = _mm512_set1_ps(e[g][j]);
        for (int c = 0; c < kDimTile / 16; ++c) a[g][c] = _mm512_fmadd_ps(ej, vr[c], a[g][c]);
      }
    }
    for (int r = n_min; r < prefetch_rows; ++r)
      PrefetchHalves(next.v + r * v_stride + d0, kDimTile);
    for (int g = 0; g < kCount; ++g) {
      float* out = partials + g * KvBlockPartialFloats(head_dim) + 2 + d0;
      for (int c = 0; c < kDimTile / 16; ++c) _mm512_storeu_ps(out + 16 * c, a[g][c]);
    }
  }
}

// Queries [0, kCount) of a wide tile, kMinWideTile <= kCount <= kMaxWideTile (a
// verification block's or a prefill tile's queries). The loops run the other way round
// from AttendTile's: one vector of 16 positions (scores) or 16 output elements (values)
// at a time, against every query of the tile, so each vector is loaded and converted
// from half precision once per tile (AttendTile: once per 4 queries) and the kCount
// chains of a step are independent, more than the FMA latency of 4 needs. Measured with
// 15 queries on the 2-core EPYC, blocks in L1: 174 ns per (query, block) against 187
// for 4-query tiles (the FMA bound: 141). The chains and their order are attention.h's,
// so the bits are the reference's.
template <int kCount>
void AttendWideTile(const KvBlockQuery* queries, const uint16_t* kt, const uint16_t* v,
                    int64_t v_stride, int head_dim, float scale, const KvBlockPrefetch& next,
                    float* partials) {
  int n[kCount];
  int n_max = 0, n_min = kKvBlockPositions;
  for (int g = 0; g < kCount; ++g) {
    n[g] = queries[g].n;
    n_max = std::max(n_max, n[g]);
    n_min = std::min(n_min, n[g]);
  }
  const int used = (n_max + 15) / 16;
  // The queries side by side at a fixed stride, q_g[d] at qs[g * kMaxHeadDim + d]: the
  // broadcasts of a step then address one base pointer with constant offsets (kCount
  // query pointers would not fit the registers). A vector copy: transposing them instead
  // cost a tenth of the kernel's time.
  alignas(64) float qs[kCount * kMaxHeadDim];
  for (int g = 0; g < kCount; ++g) {
    std::memcpy(qs + g * kMaxHeadDim, queries[g].q, head_dim * sizeof(float));
  }
  // Score chains, one vector of positions at a time; raw[g][j] = the chain of (g, j).
  alignas(64) float raw[kCount][kKvBlockPositions];
  for (int c = 0; c < used; ++c) {
    __m512 acc[kCount];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const bool prefetch_keys = c == 0 && next.kt != nullptr;
    for (int d = 0; d < head_dim; ++d) {
      if (prefetch_keys) PrefetchHalves(next.kt + d * kKvBlockPositions, kKvBlockPositions);
      const __m512 k = LoadHalves16(kt + d * kKvBlockPositions + 16 * c);
      const float* qd = qs + d;
      for (int g = 0; g < kCount; ++g) {
        acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(qd[g * kMaxHeadDim]), k, acc[g]);
      }
    }
    for (int g = 0; g < kCount; ++g) _mm512_store_ps(raw[g] + 16 * c, acc[g]);
  }
  for (int c = used; c < kVectors; ++c) {  // never attended: masked by Softmax
    for (int g = 0; g < kCount; ++g) _mm512_store_ps(raw[g] + 16 * c, _mm512_setzero_ps());
  }
  // The softmax, two queries at a time (8 exp chains in flight).
  const int64_t stride = KvBlockPartialFloats(head_dim);
  alignas(64) float e[kCount][kKvBlockPositions];
  int g = 0;
  for (; g + 2 <= kCount; g += 2) {
    __m512 s[2][kVectors];
    for (int i = 0; i < 2; ++i) {
      for (int c = 0; c < kVectors; ++c) s[i][c] = _mm512_load_ps(raw[g + i] + 16 * c);
    }
    Softmax<2>(queries + g, s, scale, e[g], partials + g * stride, stride);
  }
  if (g < kCount) {
    __m512 s[1][kVectors];
    for (int c = 0; c < kVectors; ++c) s[0][c] = _mm512_load_ps(raw[g] + 16 * c);
    Softmax<1>(queries + g, s, scale, e[g], partials + g * stride, stride);
  }
  // Value chains, 16 output elements at a time.
  const int prefetch_rows = next.v != nullptr ? next.rows : 0;
  for (int c = 0; c < head_dim / 16; ++c) {
    __m512 acc[kCount];
    for (auto& a : acc) a = _mm512_setzero_ps();
    const uint16_t* column = v + 16 * c;
    int j = 0;
    for (; j < n_min; ++j) {  // every query of the tile attends to j
      if (c == 0 && j < prefetch_rows) PrefetchHalves(next.v + j * v_stride, head_dim);
      const __m512 vj = LoadHalves16(column + j * v_stride);
      for (int i = 0; i < kCount; ++i) {
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(e[i][j]), vj, acc[i]);
      }
    }
    for (; j < n_max; ++j) {
      const __m512 vj = LoadHalves16(column + j * v_stride);
      for (int i = 0; i < kCount; ++i) {
        if (j < n[i]) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(e[i][j]), vj, acc[i]);
      }
    }
    if (c == 0) {
      for (int r = n_min; r < prefetch_rows; ++r) PrefetchHalves(next.v + r * v_stride, head_dim);
    }
    for (int i = 0; i < kCount; ++i) {
      _mm512_storeu_ps(partials + i * stride + 2 + 16 * c, acc[i]);
    }
  }
}

// Runs AttendWideTile<kCount> for count in [kMinWideTile, kMaxWideTile].
template <int kCount = kMinWideTile>
void DispatchWideTile(int count, const KvBlockQuery* queries, const uint16_t* kt, const uint16_t* v,
                      int64_t v_stride, int head_dim, float scale, const KvBlockPrefetch& next,
                      float* partials) {
  if constexpr (kCount <= kMaxWideTile) {
    if (count == kCount) {
      return AttendWideTile<kCount>(queries, kt, v, v_stride, head_dim, scale, next, partials);
    }
    DispatchWideTile<kCount + 1>(count, queries, kt, v, v_stride, head_dim, scale, next, partials);
  }
}

}  // namespace

// REQUIRES: head_dim % 64 == 0 (AttendKvBlock dispatches only such sizes).
void AttendKvBlockAvx512(const KvBlockQuery* queries, int count, const uint16_t* kt,
                         const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                         float* partials, const KvBlockPrefetch& next) {
  const int64_t stride = KvBlockPartialFloats(head_dim);
  const KvBlockPrefetch none;
  if (count >= kMinWideTile) {
    // Wide tiles of as equal sizes as possible (each >= kMinWideTile), the first of which
    // reads the block from memory and prefetches the next one.
    const int tiles = (count + kMaxWideTile - 1) / kMaxWideTile;
    int begin = 0;
    for (int t = 0; t < tiles; ++t) {
      const int size = count / tiles + (t < count % tiles ? 1 : 0);
      DispatchWideTile(size, queries + begin, kt, v, v_stride, head_dim, scale,
                       t == 0 ? next : none, partials + begin * stride);
      begin += size;
    }
    return;
  }
  switch (count) {
    case 4:
      return AttendTile<4>(queries, kt, v, v_stride, head_dim, scale, next, partials);
    case 3:
      return AttendTile<3>(queries, kt, v, v_stride, head_dim, scale, next, partials);
    case 2:
      return AttendTile<2>(queries, kt, v, v_stride, head_dim, scale, next, partials);
    case 1:
      return AttendTile<1>(queries, kt, v, v_stride, head_dim, scale, next, partials);
  }
}

}  // namespace splitspec::kernels::internal
