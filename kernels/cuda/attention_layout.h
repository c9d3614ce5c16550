// The memory one block of the CUDA attention kernel (transformer_kernels.cu,
// LaunchAttention) reads and writes, as plain arithmetic shared by the kernel
// and the CPU: the kernel takes its shared-memory offsets and its KV cache
// offsets from these functions, and tests/unit/kernels/attention_layout_test.cc
// checks, without a GPU, that every address they give lies inside its allocation
// for the shapes the project runs (SmolLM2, Llama-3, positions 1..49152).
//
//   const AttentionSharedLayout layout = AttentionSharedLayoutFor(shape.max_positions);
//   AttentionKernel<<<grid, threads, layout.total_bytes, stream>>>(...);
//
// Shared memory of one block (all of it dynamic, 16-byte aligned):
//   [sum_scratch: 32 doubles][max_scratch: 32 floats][scores: score_floats floats]
// score_floats is max_positions rounded up to kAttentionSharedVectorFloats:
// nvcc 13.0 compiles the tail of the probability-weighted sum (the last
// n_pos % 4 positions) as one 16-byte shared load (LDS.128 at
// AttentionKernel+0x3090 for sm_90), which reads up to 3 floats past position
// n_pos - 1. When the allocation ended at max_positions floats, a token whose
// n_pos was max_positions read past it (compute-sanitizer: "Invalid __shared__
// read of size 12 bytes at AttentionKernel+0x3090", GPU_FIRST_RUN.md). The
// padding floats are never written and their values never used.
#ifndef SPLITSPEC_KERNELS_CUDA_ATTENTION_LAYOUT_H_
#define SPLITSPEC_KERNELS_CUDA_ATTENTION_LAYOUT_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SPLITSPEC_ATTENTION_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPLITSPEC_ATTENTION_HOST_DEVICE inline
#endif

namespace splitspec::kernels {

struct AttentionShape {
  int q_heads = 0;        // this rank's query heads (rows of q per token / head_dim)
  int head_begin = 0;     // the model index of this rank's first query head
  int kv_head_begin = 0;  // the model index of this rank's first KV head
  int group = 1;          // query heads per KV head (n_heads / n_kv_heads)
  int head_dim = 0;
  int kv_heads = 0;  // this rank's KV heads (kv_dim = kv_heads * head_dim)
  int layer = 0;
  int max_positions = 0;  // >= 1 + the largest pos[t] of the launch (a bound; graphs pass a bucket)
  float scale = 1.0f;     // 1 / sqrt(head_dim)
};

// The widest shared-memory load the compiled kernel issues, in floats (16 bytes).
inline constexpr int kAttentionSharedVectorFloats = 4;
// The block's reduction scratch: one slot per warp of up to 1024 threads.
inline constexpr int kAttentionScratchSlots = 32;

struct AttentionSharedLayout {
  int64_t sum_scratch = 0;  // byte offset of kAttentionScratchSlots doubles
  int64_t max_scratch = 0;  // byte offset of kAttentionScratchSlots floats
  int64_t scores = 0;       // byte offset of score_floats floats
  int64_t score_floats = 0;
  int64_t total_bytes = 0;  // the launch's dynamic shared memory
};

SPLITSPEC_ATTENTION_HOST_DEVICE int64_t RoundUpTo(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

SPLITSPEC_ATTENTION_HOST_DEVICE AttentionSharedLayout AttentionSharedLayoutFor(int max_positions) {
  AttentionSharedLayout layout;
  layout.sum_scratch = 0;
  layout.max_scratch = kAttentionScratchSlots * static_cast<int64_t>(sizeof(double));
  layout.scores =
      RoundUpTo(layout.max_scratch + kAttentionScratchSlots * static_cast<int64_t>(sizeof(float)),
                kAttentionSharedVectorFloats * static_cast<int64_t>(sizeof(float)));
  layout.score_floats = RoundUpTo(max_positions, kAttentionSharedVectorFloats);
  layout.total_bytes = layout.scores + layout.score_floats * static_cast<int64_t>(sizeof(float));
  return layout;
}

// One past the last score index a block whose token attends to n_pos positions reads
// (positions 0..n_pos-1, and the vector load's tail up to the next multiple of 4).
SPLITSPEC_ATTENTION_HOST_DEVICE int64_t AttentionScoresReadEnd(int n_pos) {
  return RoundUpTo(n_pos, kAttentionSharedVectorFloats);
}

// The model's KV head that this rank's query head h reads (GQA), as an index into this
// rank's KV heads.
SPLITSPEC_ATTENTION_HOST_DEVICE int AttentionKvHead(const AttentionShape& s, int h) {
  return (s.head_begin + h) / s.group - s.kv_head_begin;
}

// Element offset, from a cache's base (transformer_kernels.h's layout [n_layers][2][capacity]
// [kv_dim]), of element i of KV head kv_head's key at position j; its value is
// capacity * kv_dim elements later.
SPLITSPEC_ATTENTION_HOST_DEVICE int64_t AttentionKeyOffset(const AttentionShape& s,
                                                           int64_t capacity, int kv_head,
                                                           int64_t j, int i) {
  const int64_t kv_dim = static_cast<int64_t>(s.kv_heads) * s.head_dim;
  return (2 * static_cast<int64_t>(s.layer) * capacity + j) * kv_dim +
         static_cast<int64_t>(kv_head) * s.head_dim + i;
}
SPLITSPEC_ATTENTION_HOST_DEVICE int64_t AttentionValueOffset(const AttentionShape& s,
                                                             int64_t capacity, int kv_head,
                                                             int64_t j, int i) {
  return AttentionKeyOffset(s, capacity, kv_head, j, i) +
         capacity * static_cast<int64_t>(s.kv_heads) * s.head_dim;
}

// Element offset of element i of query head h of token t in q [tokens, q_heads * head_dim]
// (and of the output element it produces in out, the same shape).
SPLITSPEC_ATTENTION_HOST_DEVICE int64_t AttentionQueryOffset(const AttentionShape& s, int64_t t,
                                                             int h, int i) {
  return t * s.q_heads * static_cast<int64_t>(s.head_dim) +
         static_cast<int64_t>(h) * s.head_dim + i;
}

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_ATTENTION_LAYOUT_H_
