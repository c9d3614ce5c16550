// CudaBackend: TransformerBackend (backend.h) on one CUDA device (CUDA builds
// only; Transformer picks it for TransformerOptions::device cuda:N).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<TransformerBackend> backend,
//                    NewCudaBackend(config, shard, weights, /*device=*/0, budget));
//
// Weights: copied once, at construction, into one device allocation laid out by
// PlanDeviceWeights (device_memory.h), in their file types: Q4_0, Q4_1, Q8_0
// blocks and F16 / BF16 / F32 rows stay as they are and the matmul kernels
// dequantize them (kernels/cuda/quant_matmul.h). K-quants are refused at load
// (Unimplemented naming the tensor). Activations: one workspace allocation laid
// out by PlanDeviceWorkspace, grown (never shrunk) when a call has more tokens
// or logit rows than any before. KV caches: CudaKvCache (cuda_kv_cache.h),
// per sequence, fp16, O(1) Truncate.
//
// Per call the host uploads the token ids, positions, each token's cache
// reference and the RoPE angles (computed on the host by RopeAngles, the CPU's
// function, so both backends rotate by the same angles), one small copy each;
// the only copy back is CopyLogitsToHost. Everything runs on the backend's own
// non-blocking stream (weights upload, KV cache growth copies, kernels, logits
// copy: nothing depends on the legacy default stream's implicit ordering);
// Finish() waits for it and reports the first error (a call after an error
// launches nothing).
//
// Batch invariance by construction: every kernel computes each output row of a
// token (or of a token's head) in a thread block of fixed size with per-thread
// partials in a fixed stride order and fixed reduction trees
// (kernels/cuda/transformer_kernels.h), and each matmul output in one warp
// whose lanes walk the columns in a fixed order whatever the number of
// tokens (kernels/cuda/matvec_tiling.h; Q/K/V and gate/up of one type share a
// launch, which never changes a row's bits): no
// split-K chosen by the number of rows, no atomics, no cuBLAS on any path. So a
// position's logits are bitwise identical alone, inside a (k+1)-token verify
// block, or batched with other sequences, and greedy speculative decoding
// equals plain greedy decoding on the GPU as on the CPU. The CUDA logits are
// not the CPU's bits: the same integer block products, a different float
// summation order (tests/gpu/cuda_transformer_test.cc states the bounds).
//
// CUDA graphs (cuda_graphs, one-rank groups only): a call whose sequences each
// feed at most GraphBucketOptions::max_block_tokens tokens and that asks for
// logits (decode and verify steps) is padded to its token bucket B (B logit
// rows, the attention bounded by the position bucket P) and runs as a CUDA graph:
// the per-call uploads (ids, positions, cache references, RoPE angles, logit
// rows) go to fixed workspace offsets before the graph, which holds every kernel
// from the embedding to the output head; the first eligible call of a bucket
// runs eagerly, the next is captured (then replayed once, a capture runs
// nothing), later ones replay. Padded tokens are token 0 at position 0 of a
// one-position cache the backend owns; their rows are never copied out. As
// every kernel computes a row from its own inputs only, a replay gives bitwise
// the eager call's logits. When the workspace grows (a larger prefill), every
// graph is destroyed and captured again on demand. A capture that fails (an
// operation CUDA refuses during a capture, a failed instantiation) has run
// nothing: Finish reports it with RetryEagerly() true and the transformer runs
// the call again eagerly (BackendCounters::graph_capture_fallbacks, exported to
// /metrics by the target worker); after 3 such failures the backend stops
// capturing. Written without a GPU;
// tests/gpu/cuda_graph_test.cc is the test that will run it.
//
// Tensor parallelism: this rank's shard of heads, feed-forward columns and
// vocabulary, as the CPU backend; the transformer needs a device-memory
// communicator for a group of more than one rank (NCCL, or Gloo staged through
// the host: runtime/dist/host_staged_communicator.h) and calls CompleteBuffers
// (a stream synchronization) before each collective. Written, never run on a GPU
// (tests/gpu/cuda_tp_test.cc is the test that will).
#ifndef SPLITSPEC_RUNTIME_MODEL_CUDA_BACKEND_H_
#define SPLITSPEC_RUNTIME_MODEL_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/model/backend.h"
#include "runtime/model/device_memory.h"
#include "runtime/model/model_config.h"
#include "runtime/model/tp_shard.h"

namespace splitspec::model {

// Errors: Unimplemented naming a tensor whose type has no CUDA kernel;
// ResourceExhausted naming the device and bytes when an allocation fails;
// Internal for a failed copy or stream creation. `weights` and `config` must
// outlive the backend (as for the CPU backend).
absl::StatusOr<std::unique_ptr<TransformerBackend>> NewCudaBackend(
    const ModelConfig& config, const TensorParallelShard& shard, const ShardedWeights& weights,
    int device, const DeviceMemoryBudget& budget, bool cuda_graphs = true);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_CUDA_BACKEND_H_
