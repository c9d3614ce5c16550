#include "kernels/cuda/sampling.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

constexpr int kThreads = 256;
constexpr uint32_t kSmallestPositiveBits = 1u;   // the smallest denormal
constexpr uint32_t kInfinityBits = 0x7f800000u;  // +inf: no probability reaches it

// Shared memory of one row's block. Every thread reads and writes only its own
// entries of the row (v = threadIdx.x + j * kThreads); rows meet only here.
struct RowScratch {
  double sum[kThreads];
  float value[kThreads];
  int index[kThreads];
};

// ---- Block-wide reductions in a fixed tree (every thread calls; all get the answer) ----

__device__ double BlockSum(double x, RowScratch& sh) {
  const int tid = threadIdx.x;
  sh.sum[tid] = x;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) sh.sum[tid] += sh.sum[tid + stride];
    __syncthreads();
  }
  const double result = sh.sum[0];
  __syncthreads();
  return result;
}

__device__ int BlockCount(int x, RowScratch& sh) {
  const int tid = threadIdx.x;
  sh.index[tid] = x;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) sh.index[tid] += sh.index[tid + stride];
    __syncthreads();
  }
  const int result = sh.index[0];
  __syncthreads();
  return result;
}

__device__ int BlockMin(int x, RowScratch& sh) {
  const int tid = threadIdx.x;
  sh.index[tid] = x;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) sh.index[tid] = min(sh.index[tid], sh.index[tid + stride]);
    __syncthreads();
  }
  const int result = sh.index[0];
  __syncthreads();
  return result;
}

// The largest value and its lowest index (index -1: the thread saw nothing).
__device__ void BlockArgmax(float& value, int& index, RowScratch& sh) {
  const int tid = threadIdx.x;
  sh.value[tid] = value;
  sh.index[tid] = index;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      const float other = sh.value[tid + stride];
      const int other_index = sh.index[tid + stride];
      const bool better =
          other_index >= 0 && (sh.index[tid] < 0 || other > sh.value[tid] ||
                               (other == sh.value[tid] && other_index < sh.index[tid]));
      if (better) sh.value[tid] = other, sh.index[tid] = other_index;
    }
    __syncthreads();
  }
  value = sh.value[0];
  index = sh.index[0];
  __syncthreads();
}

// ---- Cuts of a probability row p [n] (entries >= 0) ----

__device__ int CountAtLeast(const float* p, int n, float t, RowScratch& sh) {
  int count = 0;
  for (int v = threadIdx.x; v < n; v += kThreads) count += p[v] >= t;
  return BlockCount(count, sh);
}

__device__ int CountAbove(const float* p, int n, float t, RowScratch& sh) {
  int count = 0;
  for (int v = threadIdx.x; v < n; v += kThreads) count += p[v] > t;
  return BlockCount(count, sh);
}

__device__ double MassAtLeast(const float* p, int n, float t, RowScratch& sh) {
  double mass = 0.0;
  for (int v = threadIdx.x; v < n; v += kThreads) mass += p[v] >= t ? p[v] : 0.0f;
  return BlockSum(mass, sh);
}

__device__ double MassAbove(const float* p, int n, float t, RowScratch& sh) {
  double mass = 0.0;
  for (int v = threadIdx.x; v < n; v += kThreads) mass += p[v] > t ? p[v] : 0.0f;
  return BlockSum(mass, sh);
}

// The largest positive float t with at_least(t) true, by bisecting the bit
// pattern. REQUIRES at_least monotone (true, then false as t grows), true at the
// smallest positive float and false at +inf. The answer is an entry's value.
template <typename AtLeast>
__device__ float LargestThreshold(AtLeast at_least) {
  uint32_t lo = kSmallestPositiveBits, hi = kInfinityBits;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (at_least(__uint_as_float(mid))) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return __uint_as_float(lo);
}

// Zeroes every entry below t and every entry equal to t but the keep_equal
// lowest-id ones (the rank order's tie-break). REQUIRES 1 <= keep_equal <= the
// number of entries equal to t.
__device__ void CutAt(float* p, int n, float t, int keep_equal, RowScratch& sh) {
  int lo = 0, hi = n;  // equal entries with id < lo: fewer than keep_equal; id < hi: enough
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    int count = 0;
    for (int v = threadIdx.x; v < mid; v += kThreads) count += p[v] == t;
    if (BlockCount(count, sh) >= keep_equal) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  for (int v = threadIdx.x; v < n; v += kThreads) {
    if (p[v] < t || (p[v] == t && v >= hi)) p[v] = 0.0f;
  }
}

// Keeps the top_k most probable entries (ties: lower id first) if fewer than all.
__device__ void TopK(float* p, int n, int top_k, RowScratch& sh) {
  if (top_k <= 0 || top_k >= CountAbove(p, n, 0.0f, sh)) return;
  const float t = LargestThreshold([&](float x) { return CountAtLeast(p, n, x, sh) >= top_k; });
  CutAt(p, n, t, top_k - CountAbove(p, n, t, sh), sh);
}

// Keeps the shortest rank-order prefix whose mass is >= top_p times the total:
// everything above the threshold value t, then equal entries by increasing id
// while the running mass is below the wanted mass (at least one entry).
__device__ void TopP(float* p, int n, float top_p, RowScratch& sh) {
  if (!(top_p < 1.0f)) return;
  const double wanted = static_cast<double>(top_p) * MassAtLeast(p, n, 0.0f, sh);
  if (!(wanted > 0.0)) return;
  const float t = LargestThreshold([&](float x) { return MassAtLeast(p, n, x, sh) >= wanted; });
  const int equal = CountAtLeast(p, n, t, sh) - CountAbove(p, n, t, sh);
  double running = MassAbove(p, n, t, sh);
  int keep = 0;
  while (keep < equal && running < wanted) running += t, ++keep;
  CutAt(p, n, t, keep < 1 ? 1 : keep, sh);
}

__device__ void MinP(float* p, int n, float min_p, RowScratch& sh) {
  if (!(min_p > 0.0f)) return;
  float largest = 0.0f;
  int largest_index = -1;
  for (int v = threadIdx.x; v < n; v += kThreads) {
    if (largest_index < 0 || p[v] > largest) largest = p[v], largest_index = v;
  }
  BlockArgmax(largest, largest_index, sh);
  const float threshold = min_p * largest;
  for (int v = threadIdx.x; v < n; v += kThreads) {
    if (p[v] < threshold) p[v] = 0.0f;
  }
}

__device__ void WriteRowResult(const LogitsToProbsView& view, int row, int error, int index) {
  if (threadIdx.x != 0) return;
  view.out_error[row] = error;
  view.out_error_index[row] = index;
}

__global__ void LogitsToProbsKernel(LogitsToProbsView view) {
  __shared__ RowScratch sh;
  const int row = blockIdx.x, n = view.vocab;
  const float* logits = view.logits + view.row_sources[row] * view.logits_row_stride;
  float* p = view.probs + static_cast<int64_t>(row) * n;
  const RowSamplingParams params = view.params[row];

  int first_bad = n, best_index = -1;
  float best = 0.0f;
  for (int v = threadIdx.x; v < n; v += kThreads) {
    const float x = logits[v];
    if (isnan(x) || x == INFINITY) {
      first_bad = min(first_bad, v);
    } else if (best_index < 0 || x > best) {
      best = x, best_index = v;
    }
  }
  first_bad = BlockMin(first_bad, sh);
  BlockArgmax(best, best_index, sh);
  const int error = first_bad < n                           ? kLogitsRowNonFinite
                    : (best_index < 0 || best == -INFINITY) ? kLogitsRowAllMasked
                                                            : kLogitsRowOk;
  if (error != kLogitsRowOk) {
    for (int v = threadIdx.x; v < n; v += kThreads) p[v] = 0.0f;
    return WriteRowResult(view, row, error, error == kLogitsRowNonFinite ? first_bad : -1);
  }
  if (params.temperature == 0.0f) {
    for (int v = threadIdx.x; v < n; v += kThreads) p[v] = v == best_index ? 1.0f : 0.0f;
    return WriteRowResult(view, row, kLogitsRowOk, -1);
  }
  // Softmax of (logit - max) / T, as the CPU's: exp, the sum in double, times float(1 / sum).
  double local = 0.0;
  for (int v = threadIdx.x; v < n; v += kThreads) {
    const float e = expf((logits[v] - best) / params.temperature);
    p[v] = e;
    local += e;
  }
  const float inv_sum = static_cast<float>(1.0 / BlockSum(local, sh));
  for (int v = threadIdx.x; v < n; v += kThreads) p[v] *= inv_sum;
  if (params.top_k <= 0 && !(params.top_p < 1.0f) && !(params.min_p > 0.0f)) {
    return WriteRowResult(view, row, kLogitsRowOk, -1);
  }
  TopK(p, n, params.top_k, sh);
  TopP(p, n, params.top_p, sh);
  MinP(p, n, params.min_p, sh);
  const double total = MassAtLeast(p, n, 0.0f, sh);
  for (int v = threadIdx.x; v < n; v += kThreads) {
    p[v] = static_cast<float>(static_cast<double>(p[v]) / total);
  }
  WriteRowResult(view, row, kLogitsRowOk, -1);
}

}  // namespace

absl::Status LaunchLogitsToProbs(const LogitsToProbsView& view, cudaStream_t stream) {
  if (view.num_rows < 0 || view.vocab < 1 || view.logits_row_stride < view.vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchLogitsToProbs: num_rows=", view.num_rows, " vocab=", view.vocab,
        " logits_row_stride=", view.logits_row_stride, " (need >= 0, >= 1, >= vocab)"));
  }
  if (view.num_rows == 0) return absl::OkStatus();
  const struct {
    const void* pointer;
    const char* name;
  } required[] = {{view.logits, "logits"},       {view.row_sources, "row_sources"},
                  {view.params, "params"},       {view.probs, "probs"},
                  {view.out_error, "out_error"}, {view.out_error_index, "out_error_index"}};
  for (const auto& r : required) {
    if (r.pointer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("LaunchLogitsToProbs: ", r.name, " is null"));
    }
  }
  DiscardStaleCudaError();
  LogitsToProbsKernel<<<view.num_rows, kThreads, 0, stream>>>(view);
  return CudaLaunchStatus("LogitsToProbsKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels
