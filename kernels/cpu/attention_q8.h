// Attention over a q8_0 KV cache (--kv-cache-type q8_0, llama.cpp's -ctk/-ctv q8_0):
// the block order of kernels/cpu/attention.h with keys and values stored as GGUF's
// Q8_0 (blocks of 32 values along the head dimension, int8 quants and a half scale).
//
//   QuantizeRowQ8_0(key, kv_dim, quants, scales);     // when the cache stores a row
//   QuantizeQueryQ8_0(q, head_dim, qq, dq);           // once per query and head
//   AttendKvBlockQ8({{qq, dq, n}, ...}, count, rows, head_dim, scale, partials);
//   // then MergeKvBlockPartial / FinishKvBlockPartials as for the f16 cache
//
// Quantization (QuantizeRowQ8_0): ggml's reference rule quantize_row_q8_0_ref, per
// block of 32 values x: amax = max |x_i|; d = amax / 127; id = d != 0 ? 1 / d : 0;
// q_i = roundf(x_i * id) (half away from zero); the block stores half(d) and q.
//
// The numerics (what llama.cpp's CPU flash attention does with a q8_0 K cache: the
// query is quantized to q8_0 like the keys, scores are integer block dots, and q8_0
// values are widened to float). For one query q and one block whose positions
// [first, n) it attends to:
//   (qq, dq) = QuantizeRowQ8_0(q)  (head_dim / 32 blocks, dq widened to float:
//              QuantizeQueryQ8_0, once per query; the same for every KV block)
//   s_j = (fma chain over b = 0, 1, ... of float(isum_{j,b}) * (dq_b * dk_{j,b}),
//          from +0) * scale
//         where isum_{j,b} = sum over the block's 32 d of qq_d * kq_{j,d} (int32,
//         exact in any order: |isum| <= 32 * 127 * 127 < 2^24, so float(isum) is exact)
//   m, e_j, l: as attention.h
//   a_d = fma chain over j = 0, 1, ..., n - 1 of e_j * (dv_{j,d/32} * vq_{j,d}), from +0
//         (dv * vq is exact in float: 11 + 7 significant bits)
// so only s_j differs in form from the f16 order; partials merge and finish with
// MergeKvBlockPartial / FinishKvBlockPartials. Every path performs exactly these float
// operations: the scalar reference, AVX2 and AVX-512 (VNNI) agree bit for bit, and a
// position's output depends on its query, its position and the cache rows only (batch
// invariance, as attention.h). Paths: AVX-512 VNNI (vpdpbusd on keys biased by +128,
// corrected exactly; tiles of up to 4 queries share each key vector and each widened
// value vector; 16-lane softmax); AVX2 (vpmaddubsw + vpmaddwd scores, then the
// reference's softmax and value loops compiled for AVX2); the scalar reference.
//
// Layout read here (runtime/model/kv_cache.h stores it), per block of kKvBlockPositions
// positions and one head (head_dim a multiple of 32):
//   key quants  kq[(d / 4) * 256 + i * 4 + d % 4] = kq_{i,d}: groups of 4 consecutive
//               dims per position, 64 positions per group (an int8 dot of 4 products
//               per 32-bit lane, the VNNI shape, over 16 positions per vector)
//   key scales  kd[(d / 32) * 64 + i] = half dk_{i, d / 32}
//   values      row j: vq + j * vq_stride (head_dim int8), vd + j * vd_stride (head_dim
//               / 32 halves)
#ifndef SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_H_
#define SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_H_

#include <cstdint>

#include "kernels/cpu/attention.h"

namespace splitspec::kernels {

// Values per q8_0 block.
inline constexpr int kQ8BlockValues = 32;

// n / 32 blocks of x (n a multiple of 32): quants[n], scales[n / 32] halves. The rule
// of the header.
void QuantizeRowQ8_0(const float* x, int n, int8_t* quants, uint16_t* scales);

// The query's q8_0 blocks: qq[head_dim], dq[head_dim / 32] (the half scales as floats).
void QuantizeQueryQ8_0(const float* q, int head_dim, int8_t* qq, float* dq);

// One quantized query of a block (QuantizeQueryQ8_0's output), attending to positions
// [first, n) of the block as KvBlockQuery (attention.h).
struct KvBlockQueryQ8 {
  const int8_t* qq;
  const float* dq;
  int n;
  int first = 0;
};

// One block of one head of a q8_0 cache (the header's layout).
struct KvBlockQ8Rows {
  const int8_t* kq = nullptr;
  const uint16_t* kd = nullptr;
  const int8_t* vq = nullptr;
  const uint16_t* vd = nullptr;
  int64_t vq_stride = 0;
  int64_t vd_stride = 0;
};

// partials[i * KvBlockPartialFloats(head_dim) ...] = the partial of queries[i] (the
// header's order). REQUIRES: count >= 0, head_dim a
// multiple of 32, <= 256; kq and kd hold a whole block (64 positions: the vector paths
// read every position's keys, those past a query's n are ignored); vq, vd the rows
// j < max n. Path: AVX-512 (with VNNI) or AVX2 per CpuFeatures() (so
// SPLITSPEC_CPU_ISA caps it), else the reference; all give the same bits. Thread-safe.
void AttendKvBlockQ8(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                     int head_dim, float scale, float* partials);
void AttendKvBlockQ8Reference(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                              int head_dim, float scale, float* partials);

namespace internal {
void AttendKvBlockQ8Avx2(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                         int head_dim, float scale, float* partials);
void AttendKvBlockQ8Avx512(const KvBlockQueryQ8* queries, int count, const KvBlockQ8Rows& rows,
                           int head_dim, float scale, float* partials);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_ATTENTION_Q8_H_
