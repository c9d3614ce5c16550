#include "kernels/cuda/quant_matmul.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/matvec_plan.h"
#include "kernels/cuda/matvec_tiling.h"

namespace splitspec::kernels {
namespace {

__device__ __forceinline__ float DeviceRoundToHalf(float x) {
  return __half2float(__float2half_rn(x));
}

// ---------------------------------------------------------------- activations

// One warp per block of 32: lane i quantizes element i exactly as the CPU packer.
__global__ void QuantizeQ8BlocksKernel(const float* __restrict__ x, int64_t blocks,
                                       DeviceQ8Activations out) {
  const int64_t block = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (block >= blocks) return;
  const int lane = threadIdx.x % 32;
  const float v = x[block * 32 + lane];
  float amax = fabsf(v);
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const float r = fminf(127.0f, fmaxf(-127.0f, rintf(__fmul_rn(v, id))));
  const int q = static_cast<int>(r);
  out.qs[block * 32 + lane] = static_cast<int8_t>(q);
  int sum = q;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) {
    out.d[block] = DeviceRoundToHalf(d);
    out.sum[block] = static_cast<float>(sum);
    out.d_sum[block] = DeviceRoundToHalf(__fmul_rn(d, static_cast<float>(sum)));
  }
}

// ---------------------------------------------------------------- K-quants

// One warp per super-block of 256: lane i quantizes elements 8i .. 8i + 8 with the
// CPU packer's float operations (QuantizeSpan: d = amax / 127, q = rint(x * (127 / amax))).
__global__ void QuantizeQ8SuperBlocksKernel(const float* __restrict__ x, int64_t blocks,
                                            DeviceQ8Activations out) {
  const int64_t block = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (block >= blocks) return;
  const int lane = threadIdx.x % 32;
  const float* src = x + block * 256 + 8 * lane;
  float v[8];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[i] = src[i];
    amax = fmaxf(amax, fabsf(v[i]));
  }
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  uint32_t packed[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float r = fminf(127.0f, fmaxf(-127.0f, rintf(__fmul_rn(v[i], id))));
    const uint32_t byte = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(r)));
    packed[i / 4] |= byte << (8 * (i % 4));
  }
  uint32_t* dst = reinterpret_cast<uint32_t*>(out.qs + block * 256 + 8 * lane);
  dst[0] = packed[0];
  dst[1] = packed[1];
  if (lane == 0) out.d[block] = __fdiv_rn(amax, 127.0f);
}

// The part of one super-block a lane holds: its 32-element sub-block `sub` as 8
// words of 4 quants each (signed bytes), the integer scale(s) and min, and the
// super-block's float scales.

// ---------------------------------------------------------------- the matvec
// A thin shell around matvec_tiling.h: the functions there do the arithmetic;
// this file adds the exchanges between threads (GroupSum, WarpSum, the shared
// memory of CombineWarps), which the emulation models with loops.

// Up to kMaxFusedJobs matrices of one type and cols over the same activations:
// grid x runs over their rows together (job j owns rows [row_end[j - 1], row_end[j])).
struct MatVecJobs {
  const uint8_t* w[matvec::kMaxFusedJobs] = {};
  float* y[matvec::kMaxFusedJobs] = {};
  int64_t y_stride[matvec::kMaxFusedJobs] = {};
  int64_t row_end[matvec::kMaxFusedJobs] = {};
  int count = 0;
};

// The job, its output and the row inside it of thread block blockIdx.x.
struct RowTarget {
  const uint8_t* w_row;
  float* y;
  int64_t y_stride;
  int64_t row;
};

__device__ __forceinline__ RowTarget FindRow(const MatVecJobs& jobs, int64_t row_bytes) {
  const int64_t global_row = blockIdx.x;
  int j = 0;
  while (j + 1 < jobs.count && global_row >= jobs.row_end[j]) ++j;
  const int64_t row = global_row - (j == 0 ? 0 : jobs.row_end[j - 1]);
  return RowTarget{jobs.w[j] + row * row_bytes, jobs.y[j], jobs.y_stride[j], row};
}

// Integer sum over the kGroup neighbouring lanes of a group: exact.
template <int kGroup>
__device__ __forceinline__ int GroupSum(int v) {
#pragma unroll
  for (int offset = kGroup / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The xor butterfly of matvec_tiling.h step 2 (EmulateWarpSum).
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = matvec::kWarpSize / 2; offset > 0; offset /= 2) {
    v = matvec::Add(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Steps 2 to 4 for the tile's n tokens: thread j < n writes token t0 + j.
template <bool kHasMin, typename Finish>
__device__ __forceinline__ void StoreTile(const float* acc, const float* acc_min, int n, int64_t t0,
                                          const RowTarget& target, Finish finish) {
  __shared__ float warp_sums[2][matvec::kWarps][matvec::kMaxTokens];
  const int lane = threadIdx.x % matvec::kWarpSize;
  const int warp = threadIdx.x / matvec::kWarpSize;
#pragma unroll
  for (int j = 0; j < matvec::kMaxTokens; ++j) {
    if (j < n) {
      const float s = WarpSum(acc[j]);
      const float m = kHasMin ? WarpSum(acc_min[j]) : 0.0f;
      if (lane == 0) {
        warp_sums[0][warp][j] = s;
        warp_sums[1][warp][j] = m;
      }
    }
  }
  __syncthreads();
  const int j = threadIdx.x;
  if (j < n) {
    const float a = matvec::CombineWarps(warp_sums[0][0][j], warp_sums[0][1][j], warp_sums[0][2][j],
                                         warp_sums[0][3][j]);
    const float m = matvec::CombineWarps(warp_sums[1][0][j], warp_sums[1][1][j], warp_sums[1][2][j],
                                         warp_sums[1][3][j]);
    target.y[(t0 + j) * target.y_stride + target.row] = finish(a, m);
  }
}

template <typename Unit>
__global__ void __launch_bounds__(matvec::kThreads)
    MatVecQuantKernel(MatVecJobs jobs, int64_t cols, int64_t row_bytes, matvec::Q8View x,
                      int64_t tokens) {
  // acc_min is used by Q4_1 (m * d_sum) and Q4_K / Q5_K (imin, a group sum of integers).
  constexpr bool kHasMin = !std::is_same_v<Unit, matvec::Block32Unit<GgmlType::kQ8_0>> &&
                           !std::is_same_v<Unit, matvec::Block32Unit<GgmlType::kQ4_0>> &&
                           !std::is_same_v<Unit, matvec::SuperBlockUnit<GgmlType::kQ6_K>>;
  constexpr bool kHasIntegerMin =
      kHasMin && !std::is_same_v<Unit, matvec::Block32Unit<GgmlType::kQ4_1>>;
  const int64_t units = matvec::UnitsPerRow(cols, Unit::kElems);
  const RowTarget target = FindRow(jobs, row_bytes);
  const int tid = threadIdx.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * matvec::kMaxTokens;
  const int n =
      tokens - t0 < matvec::kMaxTokens ? static_cast<int>(tokens - t0) : matvec::kMaxTokens;
  const int64_t x_blocks = cols / Unit::kActivationBlock;
  float acc[matvec::kMaxTokens], acc_min[matvec::kMaxTokens];
#pragma unroll
  for (int j = 0; j < matvec::kMaxTokens; ++j) acc[j] = acc_min[j] = 0.0f;
  const int64_t steps = matvec::Steps(units);
  for (int64_t step = 0; step < steps; ++step) {  // every thread: the shuffles need whole warps
    const int64_t u = step * matvec::kThreads + tid;
    const bool valid = u < units;
    const int64_t b = u / Unit::kGroup;
    typename Unit::Weights w;
    if (valid) Unit::Load(target.w_row, u, &w);
#pragma unroll
    for (int j = 0; j < matvec::kMaxTokens; ++j) {
      if (j < n) {  // n is the same on every thread
        const int64_t t = t0 + j;
        int isum = 0, imin = 0;
        if (valid) Unit::Partial(w, x.qs + t * cols + b * Unit::kActivationBlock, u, &isum, &imin);
        isum = GroupSum<Unit::kGroup>(isum);
        if (kHasIntegerMin) imin = GroupSum<Unit::kGroup>(imin);
        if (valid && tid % Unit::kGroup == 0) {
          Unit::Update(w, isum, imin, x, t * x_blocks + b, &acc[j], &acc_min[j]);
        }
      }
    }
  }
  StoreTile<kHasMin>(acc, acc_min, n, t0, target,
                     [](float a, float m) { return Unit::Finish(a, m); });
}

template <GgmlType kType>
__global__ void __launch_bounds__(matvec::kThreads)
    MatVecFloatKernel(MatVecJobs jobs, int64_t cols, int64_t row_bytes, const float* __restrict__ x,
                      int64_t tokens) {
  using Unit = matvec::FloatUnit<kType>;
  const RowTarget target = FindRow(jobs, row_bytes);
  const int tid = threadIdx.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * matvec::kMaxTokens;
  const int n =
      tokens - t0 < matvec::kMaxTokens ? static_cast<int>(tokens - t0) : matvec::kMaxTokens;
  const int64_t units = matvec::UnitsPerRow(cols, Unit::kElems);
  float acc[matvec::kMaxTokens];
#pragma unroll
  for (int j = 0; j < matvec::kMaxTokens; ++j) acc[j] = 0.0f;
  for (int64_t u = tid; u < units; u += matvec::kThreads) {
    typename Unit::Weights w;
    Unit::Load(target.w_row, u, cols, &w);
#pragma unroll
    for (int j = 0; j < matvec::kMaxTokens; ++j) {
      if (j < n) acc[j] = Unit::Update(w, x + (t0 + j) * cols, u, cols, acc[j]);
    }
  }
  StoreTile<false>(acc, acc, n, t0, target, [](float a, float) { return a; });
}


// One planned launch (matvec_plan.h).
struct LaunchArgs {
  dim3 grid;
  MatVecJobs jobs;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  const float* x = nullptr;
  matvec::Q8View xq;
  int64_t tokens = 0;
  cudaStream_t stream = nullptr;
};

template <typename Unit>
void LaunchQuant(const LaunchArgs& a) {
  MatVecQuantKernel<Unit>
      <<<a.grid, matvec::kThreads, 0, a.stream>>>(a.jobs, a.cols, a.row_bytes, a.xq, a.tokens);
}

template <GgmlType kType>
void LaunchFloat(const LaunchArgs& a) {
  MatVecFloatKernel<kType>
      <<<a.grid, matvec::kThreads, 0, a.stream>>>(a.jobs, a.cols, a.row_bytes, a.x, a.tokens);
}

void LaunchOne(GgmlType type, const LaunchArgs& a) {
  using matvec::Block32Unit;
  using matvec::SuperBlockUnit;
  switch (type) {
    case GgmlType::kQ8_0:
      return LaunchQuant<Block32Unit<GgmlType::kQ8_0>>(a);
    case GgmlType::kQ4_0:
      return LaunchQuant<Block32Unit<GgmlType::kQ4_0>>(a);
    case GgmlType::kQ4_1:
      return LaunchQuant<Block32Unit<GgmlType::kQ4_1>>(a);
    case GgmlType::kQ4_K:
      return LaunchQuant<SuperBlockUnit<GgmlType::kQ4_K>>(a);
    case GgmlType::kQ5_K:
      return LaunchQuant<SuperBlockUnit<GgmlType::kQ5_K>>(a);
    case GgmlType::kQ6_K:
      return LaunchQuant<SuperBlockUnit<GgmlType::kQ6_K>>(a);
    case GgmlType::kF32:
      return LaunchFloat<GgmlType::kF32>(a);
    case GgmlType::kF16:
      return LaunchFloat<GgmlType::kF16>(a);
    default:
      return LaunchFloat<GgmlType::kBF16>(a);
  }
}

}  // namespace

// The device runs every weight type through the matvec (kernels/cuda/matvec_tiling.h).
bool CudaSupportsWeightType(GgmlType type) { return matvec::MatVecSupportsType(type); }

CudaActivationLayout CudaMatMulActivationLayout(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return CudaActivationLayout::kBlock32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return CudaActivationLayout::kBlock256;
    default:
      return CudaActivationLayout::kFloat;
  }
}

bool CudaMatMulQuantizesActivations(GgmlType type) {
  return CudaMatMulActivationLayout(type) != CudaActivationLayout::kFloat;
}

absl::Status LaunchQuantizeQ8Blocks(const float* x, int64_t tokens, int64_t cols,
                                    const DeviceQ8Activations& out, cudaStream_t stream) {
  if (cols % 32 != 0 || tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize: cols ", cols, " not a multiple of 32 or tokens ", tokens, " < 0"));
  }
  const int64_t blocks = tokens * (cols / 32);
  if (blocks == 0) return absl::OkStatus();
  constexpr int kThreads = 256;
  const int64_t grid = (blocks + kThreads / 32 - 1) / (kThreads / 32);
  DiscardStaleCudaError();
  QuantizeQ8BlocksKernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, blocks, out);
  return CudaLaunchStatus("QuantizeQ8BlocksKernel", __FILE__, __LINE__);
}

absl::Status LaunchQuantizeQ8SuperBlocks(const float* x, int64_t tokens, int64_t cols,
                                         const DeviceQ8Activations& out, cudaStream_t stream) {
  if (cols % 256 != 0 || tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize: cols ", cols, " not a multiple of 256 or tokens ", tokens, " < 0"));
  }
  const int64_t blocks = tokens * (cols / 256);
  if (blocks == 0) return absl::OkStatus();
  constexpr int kThreads = 256;
  const int64_t grid = (blocks + kThreads / 32 - 1) / (kThreads / 32);
  DiscardStaleCudaError();
  QuantizeQ8SuperBlocksKernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, blocks, out);
  return CudaLaunchStatus("QuantizeQ8SuperBlocksKernel", __FILE__, __LINE__);
}

absl::Status LaunchQuantizeActivations(CudaActivationLayout layout, const float* x, int64_t tokens,
                                       int64_t cols, const DeviceQ8Activations& out,
                                       cudaStream_t stream) {
  switch (layout) {
    case CudaActivationLayout::kBlock32:
      return LaunchQuantizeQ8Blocks(x, tokens, cols, out, stream);
    case CudaActivationLayout::kBlock256:
      return LaunchQuantizeQ8SuperBlocks(x, tokens, cols, out, stream);
    default:
      return absl::OkStatus();
  }
}

absl::Status LaunchMatMuls(absl::Span<const MatMulJob> jobs, const float* x,
                           const DeviceQ8Activations* xq, int64_t tokens, cudaStream_t stream) {
  std::vector<matvec::MatVecJobShape> shapes;
  shapes.reserve(jobs.size());
  for (const MatMulJob& job : jobs) shapes.push_back({job.w.type, job.w.rows, job.w.cols});
  absl::StatusOr<std::vector<matvec::MatVecLaunch>> plan =
      matvec::PlanMatVecLaunches(shapes, tokens);
  if (!plan.ok()) return plan.status();
  for (const matvec::MatVecLaunch& launch : *plan) {
    LaunchArgs a;
    a.grid = dim3(static_cast<unsigned>(launch.rows), static_cast<unsigned>(launch.token_tiles));
    a.cols = launch.cols;
    a.row_bytes = static_cast<int64_t>(RowBytes(launch.type, launch.cols));
    a.x = x;
    a.tokens = tokens;
    a.stream = stream;
    if (CudaMatMulQuantizesActivations(launch.type)) {
      if (xq == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "CUDA matmul of ", GetGgmlTypeTraits(launch.type).name, ": no quantized activations"));
      }
      a.xq = matvec::Q8View{xq->qs, xq->d, xq->d_sum, xq->sum};
    }
    int64_t row_end = 0;
    for (int index : launch.jobs) {
      const MatMulJob& job = jobs[index];
      const int k = a.jobs.count++;
      a.jobs.w[k] = static_cast<const uint8_t*>(job.w.data);
      a.jobs.y[k] = job.y;
      a.jobs.y_stride[k] = job.y_stride;
      row_end += job.w.rows;
      a.jobs.row_end[k] = row_end;
    }
    DiscardStaleCudaError();
    LaunchOne(launch.type, a);
    const absl::Status launched = CudaLaunchStatus("MatVec kernel", __FILE__, __LINE__);
    if (!launched.ok()) return launched;
  }
  return absl::OkStatus();
}

absl::Status LaunchMatMul(const DeviceMatrix& w, const float* x, const DeviceQ8Activations* xq,
                          int64_t tokens, float* y, int64_t y_stride, cudaStream_t stream) {
  const MatMulJob job{w, y, y_stride};
  return LaunchMatMuls({&job, 1}, x, xq, tokens, stream);
}

}  // namespace splitspec::kernels
