// Attention over a half-precision KV cache in splitspec's own order: online softmax
// over fixed blocks of kKvBlockPositions positions (flash-decoding), each block's
// partial result computed on its own and the partials merged in increasing block order.
//
//   // one KV head, block b, a tile of queries sharing it (GQA heads x tokens):
//   AttendKvBlock({queries, count}, kt_block, v_rows, kv_dim, head_dim, scale, partials);
//   // one query: merge its blocks 0, 1, ..., in that order
//   std::copy(p0, p0 + KvBlockPartialFloats(head_dim), state);
//   MergeKvBlockPartial(p1, head_dim, state);  ...
//   FinishKvBlockPartials(state, head_dim, out);
//
// The order (every path performs exactly these float operations, so the scalar
// reference, AVX2 and AVX-512 agree bit for bit). For one query q (head_dim floats)
// and one block whose first n positions it attends to (k_j, v_j: half values):
//   s_j = (fma chain over d = 0, 1, ... of q_d * k_{j,d}, from +0) * scale
//   m   = max_j s_j                                   (exact in any order)
//   e_j = ExpApprox<GgmlOrder::kAvx512>(s_j - m)     (kernels/cpu/exp_approx.h)
//   l   = 16-lane sum of e_j: lane i adds e_j for j % 16 == i in increasing j, from +0,
//         then the lanes fold in halves, x_i <- x_{i+h} + x_i for h = 8, 4, 2, 1
//   a_d = fma chain over j = 0, 1, ..., n - 1 of e_j * v_{j,d}, from +0
// giving the partial {m, l, a[head_dim]}. Merging partial {m', l', a'} into the
// state {M, L, A} (the first block's partial copied):
//   N = max(M, m'); x = ExpApprox(M - N); y = ExpApprox(m' - N)
//   L = fma(L, x, l' * y);  A_d = fma(A_d, x, a'_d * y);  M = N
// and the output is out_d = A_d / L. A position's output depends only on its query,
// its own position (which blocks, how many positions of the last) and the cache rows:
// not on the other queries of a tile, on how blocks are split across threads, on the
// batch or on a verification block around it (batch invariance).
//
// Cache layout read here (runtime/model/kv_cache.h stores it): the keys of a block
// transposed, kt[d * kKvBlockPositions + i] = k_{b * kKvBlockPositions + i, d} for the
// head's head_dim rows d (so a vector holds one element of 16 positions and the score
// chains need no horizontal sums); the values row by row, v_j at v + j * v_stride.
#ifndef SPLITSPEC_KERNELS_CPU_ATTENTION_H_
#define SPLITSPEC_KERNELS_CPU_ATTENTION_H_

#include <cstdint>

namespace splitspec::kernels {

// Positions per KV block: the fixed boundaries of the order above.
inline constexpr int kKvBlockPositions = 64;

// Floats of one partial or merge state: {m, l, a[head_dim]}.
inline constexpr int64_t KvBlockPartialFloats(int head_dim) { return head_dim + 2; }

// One query of a block: q [head_dim] (values exactly representable in half precision
// keep the order meaningful but are not required), attending to positions [first, n) of
// the block, 0 <= first < n <= kKvBlockPositions (first > 0: a sliding window starts
// inside the block). The positions before `first` count as masked: s_j = -inf, e_j = 0,
// so they add nothing to l and a (the order above is otherwise unchanged).
struct KvBlockQuery {
  const float* q;
  int n;
  int first = 0;
};

// The block a caller attends next, for AttendKvBlock to prefetch while it computes the
// current one (its cache misses then overlap arithmetic). A hint only: results do not
// depend on it. kt and v as AttendKvBlock's (a whole block of keys: head_dim rows of
// kKvBlockPositions halves), rows: the value rows to fetch (<= kKvBlockPositions).
struct KvBlockPrefetch {
  const uint16_t* kt = nullptr;
  const uint16_t* v = nullptr;
  int rows = 0;
};

// partials[i * KvBlockPartialFloats(head_dim) ...] = the partial of queries[i] (the
// header's order). kt: [head_dim][kKvBlockPositions] halves (only the first max n
// columns are used); v: row j at v + j * v_stride, head_dim halves, for j < max n.
// REQUIRES: count >= 0, head_dim >= 1. Path: AVX-512 or AVX2 (CpuFeatures(), so
// SPLITSPEC_CPU_ISA caps it) for head_dim in {64, 128, 256}, else the reference;
// all give the same bits. Thread-safe (no state).
// next: prefetched by the AVX-512 path (ignored by the others).
void AttendKvBlock(const KvBlockQuery* queries, int count, const uint16_t* kt, const uint16_t* v,
                   int64_t v_stride, int head_dim, float scale, float* partials,
                   const KvBlockPrefetch& next = {});
void AttendKvBlockReference(const KvBlockQuery* queries, int count, const uint16_t* kt,
                            const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                            float* partials);

// state <- state merged with the next block's partial (the header's merge).
void MergeKvBlockPartial(const float* partial, int head_dim, float* state);
// out[d] = A_d / L of a merged state.
void FinishKvBlockPartials(const float* state, int head_dim, float* out);

namespace internal {
void AttendKvBlockAvx2(const KvBlockQuery* queries, int count, const uint16_t* kt,
                       const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                       float* partials);
void AttendKvBlockAvx512(const KvBlockQuery* queries, int count, const uint16_t* kt,
                         const uint16_t* v, int64_t v_stride, int head_dim, float scale,
                         float* partials, const KvBlockPrefetch& next);
void MergeKvBlockPartialAvx2(const float* partial, int head_dim, float* state);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_ATTENTION_H_
