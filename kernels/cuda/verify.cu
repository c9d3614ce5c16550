#include "kernels/cuda/verify.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

constexpr int kThreads = 256;

// Shared memory of one sequence's block.
struct BlockScratch {
  double key[kThreads];  // argmax keys, or per-thread weight sums when sampling
  int index[kThreads];
  int flag;    // set when an invalid entry was seen
  int result;  // a block-wide answer broadcast to all threads
  int chosen_thread;
  double chosen_prefix;
  double target;
  int fallback;
};

// ---- Block-wide row primitives (every thread calls them; all get the answer) ----

__device__ bool Better(double key, int index, double other_key, int other_index) {
  if (index < 0) return false;
  if (other_index < 0) return true;
  return key != other_key ? key > other_key : index < other_index;
}

// ArgmaxProbs (coupled = false) or GumbelArgmax (coupled = true) over p [n].
__device__ int BlockArgmax(const float* p, int n, bool coupled, uint64_t seed, int64_t position,
                           BlockScratch& sh) {
  const int tid = threadIdx.x;
  if (tid == 0) sh.flag = 0;
  __syncthreads();
  double best_key = 0.0;
  int best = -1;
  for (int v = tid; v < n; v += kThreads) {
    const float w = p[v];
    if (!IsValidWeight(w)) sh.flag = 1;
    if (!(w > 0.0f)) continue;
    const double key = coupled ? log(static_cast<double>(w)) + GumbelNoise(seed, position, v) : w;
    if (best < 0 || key > best_key) best_key = key, best = v;
  }
  sh.key[tid] = best_key;
  sh.index[tid] = best;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride &&
        Better(sh.key[tid + stride], sh.index[tid + stride], sh.key[tid], sh.index[tid])) {
      sh.key[tid] = sh.key[tid + stride];
      sh.index[tid] = sh.index[tid + stride];
    }
    __syncthreads();
  }
  const int result = sh.flag ? -1 : sh.index[0];
  __syncthreads();
  return result;
}

// SampleFromWeights over w [n] with uniform u: thread t owns a contiguous chunk,
// thread 0 scans the chunk sums, the owner of the target walks its chunk.
__device__ int BlockSample(const float* w, int n, double u, BlockScratch& sh) {
  const int tid = threadIdx.x;
  const int chunk = (n + kThreads - 1) / kThreads;
  const int begin = min(n, tid * chunk), end = min(n, begin + chunk);
  if (tid == 0) sh.flag = 0;
  __syncthreads();
  double sum = 0.0;
  for (int v = begin; v < end; ++v) {
    if (!IsValidWeight(w[v])) sh.flag = 1;
    sum += w[v];
  }
  sh.key[tid] = sum;
  __syncthreads();
  if (tid == 0) {
    sh.result = -1;
    sh.chosen_thread = -1;
    double total = 0.0;
    for (int t = 0; t < kThreads; ++t) total += sh.key[t];
    if (!sh.flag && total > 0.0) {
      const double target = u * total;
      double prefix = 0.0, last_prefix = 0.0;
      int last = -1;
      for (int t = 0; t < kThreads; ++t) {
        if (sh.key[t] > 0.0) {
          last = t;
          last_prefix = prefix;
          if (prefix + sh.key[t] > target) {
            sh.chosen_thread = t;
            sh.chosen_prefix = prefix;
            break;
          }
        }
        prefix += sh.key[t];
      }
      sh.fallback = sh.chosen_thread < 0;
      if (sh.fallback) sh.chosen_thread = last, sh.chosen_prefix = last_prefix;
      sh.target = target;
    }
  }
  __syncthreads();
  if (tid == sh.chosen_thread) {
    double running = sh.chosen_prefix;
    int found = -1, last = -1;
    for (int v = begin; v < end; ++v) {
      if (w[v] > 0.0f) {
        running += w[v];
        last = v;
        if (!sh.fallback && running > sh.target) {
          found = v;
          break;
        }
      }
    }
    sh.result = found >= 0 ? found : last;
  }
  __syncthreads();
  const int result = sh.result;
  __syncthreads();
  return result;
}

// The mode's own choice from row p (see ChooseFromRow in kernels/cpu/verify.cc).
__device__ int BlockChoose(int mode, const float* p, int n, uint64_t seed, int64_t position,
                           BlockScratch& sh) {
  if (mode == kVerifyRejection) {
    return BlockSample(p, n, UniformDouble(seed, position, RandomPurpose::kSample), sh);
  }
  return BlockArgmax(p, n, mode == kVerifyCoupled, seed, position, sh);
}

// q_g(token); -1 when the q row is malformed. Thread 0 only.
__device__ float DraftQAt(const VerifyBatchView& view, int64_t g, int token) {
  if (view.q_format == kDraftQDense) {
    const float q = view.q_probs[g * view.vocab + token];
    return IsValidWeight(q) ? q : -1.0f;
  }
  if (view.q_format != kDraftQSparse) return -1.0f;
  float found = 0.0f;
  for (int j = view.q_offsets[g]; j < view.q_offsets[g + 1]; ++j) {
    const int id = view.q_ids[j];
    const float q = view.q_probs[j];
    if (id < 0 || id >= view.vocab || !IsValidWeight(q)) return -1.0f;
    if (id == token) found = q;
  }
  return found;
}

// residual = max(0, p - q_g) into `residual` [vocab]. Returns kVerifyOk, or
// kVerifyBadTargetRow if p is malformed, else kVerifyBadDraftQ if q is.
__device__ int BlockResidual(const VerifyBatchView& view, int64_t g, const float* p,
                             float* residual, BlockScratch& sh) {
  const int tid = threadIdx.x, vocab = view.vocab;
  if (tid == 0) sh.flag = 0;
  __syncthreads();
  const float* q_dense = view.q_format == kDraftQDense ? view.q_probs + g * vocab : nullptr;
  for (int v = tid; v < vocab; v += kThreads) {
    if (!IsValidWeight(p[v])) atomicOr(&sh.flag, 1);
    float r = p[v];
    if (q_dense != nullptr) {
      if (!IsValidWeight(q_dense[v])) atomicOr(&sh.flag, 2);
      r = p[v] - q_dense[v];
      r = r > 0.0f ? r : 0.0f;
    }
    residual[v] = r;
  }
  __syncthreads();
  if (q_dense == nullptr) {
    for (int j = view.q_offsets[g] + tid; j < view.q_offsets[g + 1]; j += kThreads) {
      const int id = view.q_ids[j];
      if (id < 0 || id >= vocab || !IsValidWeight(view.q_probs[j])) {
        atomicOr(&sh.flag, 2);
        continue;
      }
      const float r = p[id] - view.q_probs[j];
      residual[id] = r > 0.0f ? r : 0.0f;
    }
  }
  __syncthreads();
  const int error = (sh.flag & 1)   ? kVerifyBadTargetRow
                    : (sh.flag & 2) ? kVerifyBadDraftQ
                                    : kVerifyOk;
  __syncthreads();
  return error;
}

// ---- The kernel: one block per sequence, the CPU reference's control flow ----

__device__ void WriteResult(const VerifyBatchView& view, int s, int accepted, int committed,
                            bool rejected, int error, int error_index) {
  if (threadIdx.x != 0) return;
  view.out_accepted[s] = error ? 0 : accepted;
  view.out_num_committed[s] = error ? 0 : committed;
  view.out_rejected[s] = (!error && rejected) ? 1 : 0;
  view.out_error[s] = error;
  view.out_error_index[s] = error ? error_index : -1;
}

__global__ void VerifyBatchKernel(VerifyBatchView view) {
  __shared__ BlockScratch sh;
  const int s = blockIdx.x;
  const int mode = view.modes[s];
  if (mode != kVerifyGreedy && mode != kVerifyRejection && mode != kVerifyCoupled) {
    return WriteResult(view, s, 0, 0, false, kVerifyBadMode, -1);
  }
  const int begin = view.draft_offsets[s];
  const int k = view.draft_offsets[s + 1] - begin;
  if (begin < 0 || k < 0) return WriteResult(view, s, 0, 0, false, kVerifyBadShape, -1);
  if (mode == kVerifyRejection && k > 0 && view.q_format == kDraftQNone) {
    return WriteResult(view, s, 0, 0, false, kVerifyBadDraftQ, 0);
  }
  const int vocab = view.vocab;
  const uint64_t seed = view.seeds[s];
  const int64_t start = view.start_positions[s];
  const float* rows = view.probs + (static_cast<int64_t>(begin) + s) * vocab;
  float* residual = view.scratch + static_cast<int64_t>(s) * vocab;
  int* out = view.out_committed + begin + s;
  int accepted = 0;

  for (int i = 0; i < k; ++i) {
    const int64_t g = begin + i;
    const int token = view.draft_tokens[g];
    const float* p = rows + static_cast<int64_t>(i) * vocab;
    const int64_t position = start + i;
    if (token < 0 || token >= vocab)
      return WriteResult(view, s, 0, 0, false, kVerifyTokenOutOfRange, i);
    int correction;
    if (mode == kVerifyRejection) {
      if (threadIdx.x == 0) {
        const float q = DraftQAt(view, g, token);
        if (q < 0.0f)
          sh.result = -kVerifyBadDraftQ;
        else if (q == 0.0f)
          sh.result = -kVerifyTokenHasZeroQ;
        else if (!IsValidWeight(p[token]))
          sh.result = -kVerifyBadTargetRow;
        else
          sh.result = UniformDouble(seed, position, RandomPurpose::kAcceptTest) <
                      static_cast<double>(p[token]) / static_cast<double>(q);
      }
      __syncthreads();
      const int decision = sh.result;
      __syncthreads();
      if (decision < 0) return WriteResult(view, s, 0, 0, false, -decision, i);
      if (decision == 1) {
        if (threadIdx.x == 0) out[accepted] = token;
        ++accepted;
        continue;
      }
      const int residual_error = BlockResidual(view, g, p, residual, sh);
      if (residual_error != kVerifyOk) return WriteResult(view, s, 0, 0, false, residual_error, i);
      const double u_residual = UniformDouble(seed, position, RandomPurpose::kResidual);
      correction = BlockSample(residual, vocab, u_residual, sh);
      if (correction < 0) correction = BlockSample(p, vocab, u_residual, sh);
    } else {
      correction = BlockChoose(mode, p, vocab, seed, position, sh);
      if (correction == token) {
        if (threadIdx.x == 0) out[accepted] = token;
        ++accepted;
        continue;
      }
    }
    if (correction < 0) return WriteResult(view, s, 0, 0, false, kVerifyBadTargetRow, i);
    if (threadIdx.x == 0) out[accepted] = correction;
    return WriteResult(view, s, accepted, accepted + 1, true, kVerifyOk, -1);
  }
  int committed = accepted;
  if (view.want_bonus[s]) {
    const int bonus =
        BlockChoose(mode, rows + static_cast<int64_t>(k) * vocab, vocab, seed, start + k, sh);
    if (bonus < 0) return WriteResult(view, s, 0, 0, false, kVerifyBadTargetRow, k);
    if (threadIdx.x == 0) out[committed] = bonus;
    ++committed;
  }
  WriteResult(view, s, accepted, committed, false, kVerifyOk, -1);
}

absl::Status NullArgument(const char* name) {
  return absl::InvalidArgumentError(absl::StrCat("LaunchVerifyBatch: ", name, " is null"));
}

}  // namespace

absl::Status LaunchVerifyBatch(const VerifyBatchView& view, cudaStream_t stream) {
  if (view.num_sequences < 0 || view.vocab < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchVerifyBatch: num_sequences=", view.num_sequences, " vocab=", view.vocab,
                     " (need >= 0 and >= 1)"));
  }
  if (view.num_sequences == 0) return absl::OkStatus();
  const struct {
    const void* pointer;
    const char* name;
  } required[] = {{view.modes, "modes"},
                  {view.draft_offsets, "draft_offsets"},
                  {view.seeds, "seeds"},
                  {view.start_positions, "start_positions"},
                  {view.want_bonus, "want_bonus"},
                  {view.draft_tokens, "draft_tokens"},
                  {view.probs, "probs"},
                  {view.scratch, "scratch"},
                  {view.out_accepted, "out_accepted"},
                  {view.out_num_committed, "out_num_committed"},
                  {view.out_rejected, "out_rejected"},
                  {view.out_error, "out_error"},
                  {view.out_error_index, "out_error_index"},
                  {view.out_committed, "out_committed"}};
  for (const auto& r : required) {
    if (r.pointer == nullptr) return NullArgument(r.name);
  }
  if (view.q_format == kDraftQSparse && (view.q_offsets == nullptr || view.q_ids == nullptr)) {
    return NullArgument("q_offsets or q_ids (sparse q)");
  }
  if (view.q_format != kDraftQNone && view.q_probs == nullptr) return NullArgument("q_probs");
  if (view.q_format != kDraftQNone && view.q_format != kDraftQSparse &&
      view.q_format != kDraftQDense) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchVerifyBatch: unknown q_format ", view.q_format));
  }
  DiscardStaleCudaError();
  VerifyBatchKernel<<<view.num_sequences, kThreads, 0, stream>>>(view);
  return CudaLaunchStatus("VerifyBatchKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels
