#include "kernels/cuda/quant_matmul.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/matvec_plan.h"
#include "kernels/cuda/matvec_tiling.h"
#include "kernels/cuda/mma_tiling.h"
#include "kernels/cuda/quant_mma.h"

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

// ---------------------------------------------------------------- the matvec
// A thin shell around matvec_tiling.h: the functions there do the arithmetic;
// this file adds the exchanges between lanes (GroupSum, WarpSum), which the
// emulation models with loops. One warp per row, kRowsPerBlock rows per block,
// no shared memory and no barrier (a warp past the last row returns at once).

// Up to kMaxFusedJobs matrices of one type and cols over the same activations:
// the grid's warps run over their rows together (job j owns rows
// [row_end[j - 1], row_end[j])).
struct MatVecJobs {
  const uint8_t* w[matvec::kMaxFusedJobs] = {};
  float* y[matvec::kMaxFusedJobs] = {};
  int64_t y_stride[matvec::kMaxFusedJobs] = {};
  int64_t row_end[matvec::kMaxFusedJobs] = {};
  int count = 0;
};

// The job, its output and the row inside it of the calling warp.
struct RowTarget {
  const uint8_t* w_row;
  float* y;
  int64_t y_stride;
  int64_t row;
};

// False for a warp past the launch's last row (the same on all its lanes). The
// job's pointers are picked with constant indices (matvec::LocateRow says why).
__device__ __forceinline__ bool FindRow(const MatVecJobs& jobs, int64_t row_bytes,
                                        RowTarget* target) {
  int job = 0;
  int64_t row = 0;
  if (!matvec::LocateRow(jobs.row_end, jobs.count,
                         matvec::LaunchRow(blockIdx.x, threadIdx.x / matvec::kWarpSize), &job,
                         &row)) {
    return false;
  }
  const uint8_t* w = jobs.w[0];
  float* y = jobs.y[0];
  int64_t y_stride = jobs.y_stride[0];
#pragma unroll
  for (int k = 1; k < matvec::kMaxFusedJobs; ++k) {
    if (k == job) {
      w = jobs.w[k];
      y = jobs.y[k];
      y_stride = jobs.y_stride[k];
    }
  }
  *target = RowTarget{w + row * row_bytes, y, y_stride, row};
  return true;
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

// Steps 2 and 3 for the tile's n <= kCols tokens: lane j < n writes token t0 + j.
template <int kCols, bool kHasMin, typename Finish>
__device__ __forceinline__ void StoreTile(const float* acc, const float* acc_min, int n, int64_t t0,
                                          const RowTarget& target, Finish finish) {
  const int lane = threadIdx.x % matvec::kWarpSize;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    if (j < n) {  // n is the same on every lane
      const float s = WarpSum(acc[j]);
      const float m = kHasMin ? WarpSum(acc_min[j]) : 0.0f;
      if (lane == j) target.y[(t0 + j) * target.y_stride + target.row] = finish(s, m);
    }
  }
}

// The tokens of blockIdx.y's tile: n <= kCols (the planner picks kCols >= n).
template <int kCols>
__device__ __forceinline__ int TileTokens(int64_t tokens, int64_t t0) {
  return tokens - t0 < kCols ? static_cast<int>(tokens - t0) : kCols;
}

// Steps whose weights a lane loads before it uses them: the unit's number for
// tiles of 1 and 2 tokens, 2 for wider tiles (each weight then feeds more dp4a,
// and the registers go to the tile's accumulators). No effect on the arithmetic.
template <typename Unit, int kCols>
inline constexpr int kStepsInFlight = kCols <= 2 ? Unit::kStepsInFlight : 2;

// Blocks resident per SM at least, which caps a thread's registers: 8 (half the
// SM's warps, 64 registers) for 1-token tiles, whose time is the weight stream;
// 6 (80) for 2-token tiles (64 spilled for Q4_0); 4 (128) for wider tiles, whose
// accumulators need the registers.
template <int kCols>
inline constexpr int kMinBlocks = kCols == 1   ? 8
                                  : kCols == 2 ? 6
                                               : 4;

template <typename Unit, int kCols>
__global__ void __launch_bounds__(matvec::kThreads, kMinBlocks<kCols>)
    MatVecQuantKernel(MatVecJobs jobs, int64_t cols, int64_t row_bytes, matvec::Q8View x,
                      int64_t tokens) {
  // acc_min is used by Q4_1 (m * d_sum) and Q4_K / Q5_K (imin, a group sum of integers).
  constexpr bool kHasMin = !std::is_same_v<Unit, matvec::Block32Unit<GgmlType::kQ8_0>> &&
                           !std::is_same_v<Unit, matvec::Block32Unit<GgmlType::kQ4_0>> &&
                           !std::is_same_v<Unit, matvec::SuperBlockUnit<GgmlType::kQ6_K>>;
  constexpr bool kHasIntegerMin =
      kHasMin && !std::is_same_v<Unit, matvec::Block32Unit<GgmlType::kQ4_1>>;
  constexpr int kInFlight = kStepsInFlight<Unit, kCols>;
  RowTarget target;
  if (!FindRow(jobs, row_bytes, &target)) return;
  const int lane = threadIdx.x % matvec::kWarpSize;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * matvec::kMaxTokens;
  const int n = TileTokens<kCols>(tokens, t0);
  const int64_t units = matvec::UnitsPerRow(cols, Unit::kElems);
  const int64_t x_blocks = cols / Unit::kActivationBlock;
  const int8_t* x_tile = x.qs + t0 * cols;
  float acc[kCols], acc_min[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc[j] = acc_min[j] = 0.0f;
  const int64_t steps = matvec::Steps(units);
  for (int64_t s0 = 0; s0 < steps; s0 += kInFlight) {  // every lane: the shuffles need whole warps
    typename Unit::Weights w[kInFlight];
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int64_t u = (s0 + i) * matvec::kWarpSize + lane;
      if (u < units) Unit::Load(target.w_row, u, &w[i]);
    }
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      if (s0 + i >= steps) break;  // the same on every lane
      const int64_t u = (s0 + i) * matvec::kWarpSize + lane;
      const bool valid = u < units;
      const int64_t b = u / Unit::kGroup;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (j < n) {  // n is the same on every lane
          int isum = 0, imin = 0;
          if (valid) {
            Unit::Partial(w[i], x_tile + j * cols + b * Unit::kActivationBlock, u, &isum, &imin);
          }
          isum = GroupSum<Unit::kGroup>(isum);
          if (kHasIntegerMin) imin = GroupSum<Unit::kGroup>(imin);
          if (valid && lane % Unit::kGroup == 0) {
            Unit::Update(w[i], isum, imin, x, (t0 + j) * x_blocks + b, &acc[j], &acc_min[j]);
          }
        }
      }
    }
  }
  StoreTile<kCols, kHasMin>(acc, acc_min, n, t0, target,
                            [](float a, float m) { return Unit::Finish(a, m); });
}

template <GgmlType kType, int kCols>
__global__ void __launch_bounds__(matvec::kThreads, kMinBlocks<kCols>)
    MatVecFloatKernel(MatVecJobs jobs, int64_t cols, int64_t row_bytes, const float* __restrict__ x,
                      int64_t tokens) {
  using Unit = matvec::FloatUnit<kType>;
  constexpr int kInFlight = kStepsInFlight<Unit, kCols>;
  RowTarget target;
  if (!FindRow(jobs, row_bytes, &target)) return;
  const int lane = threadIdx.x % matvec::kWarpSize;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * matvec::kMaxTokens;
  const int n = TileTokens<kCols>(tokens, t0);
  const int64_t units = matvec::UnitsPerRow(cols, Unit::kElems);
  const float* x_tile = x + t0 * cols;
  float acc[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc[j] = 0.0f;
  for (int64_t u0 = lane; u0 < units; u0 += kInFlight * matvec::kWarpSize) {
    typename Unit::Weights w[kInFlight];
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int64_t u = u0 + i * matvec::kWarpSize;
      if (u < units) Unit::Load(target.w_row, u, cols, &w[i]);
    }
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int64_t u = u0 + i * matvec::kWarpSize;
      if (u >= units) break;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        if (j < n) acc[j] = Unit::Update(w[i], x_tile + j * cols, u, cols, acc[j]);
      }
    }
  }
  StoreTile<kCols, false>(acc, acc, n, t0, target, [](float a, float) { return a; });
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
  int tile_cols = 1;
  cudaStream_t stream = nullptr;
};

template <typename Unit, int kCols>
void LaunchQuantTile(const LaunchArgs& a) {
  MatVecQuantKernel<Unit, kCols>
      <<<a.grid, matvec::kThreads, 0, a.stream>>>(a.jobs, a.cols, a.row_bytes, a.xq, a.tokens);
}

template <GgmlType kType, int kCols>
void LaunchFloatTile(const LaunchArgs& a) {
  MatVecFloatKernel<kType, kCols>
      <<<a.grid, matvec::kThreads, 0, a.stream>>>(a.jobs, a.cols, a.row_bytes, a.x, a.tokens);
}

// The kernel compiled for the planned tile width (matvec::TileColumns).
template <typename Unit>
void LaunchQuant(const LaunchArgs& a) {
  switch (a.tile_cols) {
    case 1:
      return LaunchQuantTile<Unit, 1>(a);
    case 2:
      return LaunchQuantTile<Unit, 2>(a);
    case 4:
      return LaunchQuantTile<Unit, 4>(a);
    case 8:
      return LaunchQuantTile<Unit, 8>(a);
    default:
      return LaunchQuantTile<Unit, matvec::kMaxTokens>(a);
  }
}

template <GgmlType kType>
void LaunchFloat(const LaunchArgs& a) {
  switch (a.tile_cols) {
    case 1:
      return LaunchFloatTile<kType, 1>(a);
    case 2:
      return LaunchFloatTile<kType, 2>(a);
    case 4:
      return LaunchFloatTile<kType, 4>(a);
    case 8:
      return LaunchFloatTile<kType, 8>(a);
    default:
      return LaunchFloatTile<kType, matvec::kMaxTokens>(a);
  }
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
    a.grid =
        dim3(static_cast<unsigned>(launch.row_blocks), static_cast<unsigned>(launch.token_tiles));
    a.tile_cols = launch.tile_cols;
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
    if (a.xq.qs != nullptr && reinterpret_cast<uintptr_t>(a.xq.qs) % 16 != 0) {
      return absl::InvalidArgumentError("CUDA matmul: quantized activations not 16-byte aligned");
    }
    int64_t row_end = 0;
    for (int index : launch.jobs) {
      const MatMulJob& job = jobs[index];
      if (reinterpret_cast<uintptr_t>(job.w.data) % 16 != 0) {
        return absl::InvalidArgumentError(absl::StrCat("CUDA matmul job ", index, " (",
                                                       GetGgmlTypeTraits(job.w.type).name,
                                                       "): weights not 16-byte aligned"));
      }
    }
    // Many tokens: the tensor cores, one launch per matrix, the same bits (mma_tiling.h).
    if (mma::UseTensorCores(launch.type, tokens)) {
      for (int index : launch.jobs) {
        const MatMulJob& job = jobs[index];
        const absl::Status launched =
            LaunchMmaMatMul(job.w, a.xq, tokens, job.y, job.y_stride, stream);
        if (!launched.ok()) return launched;
      }
      continue;
    }
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
