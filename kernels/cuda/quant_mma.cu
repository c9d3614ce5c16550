#include "kernels/cuda/quant_mma.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/mma_tiling.h"

namespace splitspec::kernels {
namespace {

// c = a * b (m16n8k32, int8 in, exact int32 out; the fragment layout is mma_tiling.h's).
// Requires sm_80 or later (the build's CUDA architectures are 80 and 90).
__device__ __forceinline__ void MmaS8(const int (&a)[4], const int (&b)[2], int (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %10, %10, %10};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
#else
  (void)a;
  (void)b;
  (void)c;
  __trap();
#endif
}

// A thin shell around mma_tiling.h: warp c runs chain c (blocks c, c + 16, ...) of
// the tile's outputs, loading the next block's fragments before it multiplies the
// current one (no effect on the arithmetic); then the warps' partial sums meet in
// shared memory in the matvec's butterfly order and warp 0 stores.
template <GgmlType kType>
__global__ void __launch_bounds__(mma::kThreads, 1)
    MmaMatMulKernel(mma::TileView t, matvec::Q8View x, float* __restrict__ y, int64_t y_stride) {
  constexpr bool kHasMin = kType == GgmlType::kQ4_1;
  const int warp = static_cast<int>(threadIdx.x) / mma::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % mma::kWarpSize;
  t.tok0 = static_cast<int64_t>(blockIdx.x) * mma::kTileTokens;
  t.row0 = static_cast<int64_t>(blockIdx.y) * mma::kTileRows;
  float acc[mma::kMTiles][mma::kNTiles][4], acc_min[mma::kMTiles][mma::kNTiles][4];
#pragma unroll
  for (int mt = 0; mt < mma::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < mma::kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = acc_min[mt][nt][e] = 0.0f;
    }
  }
  const int64_t blocks = t.cols / 32;
  mma::LaneStep<kType> step;
  if (warp < blocks) mma::LoadLaneStep<kType>(t, x, warp, lane, &step);
  for (int64_t b = warp; b < blocks; b += mma::kWarps) {
    mma::LaneStep<kType> next;
    if (b + mma::kWarps < blocks) mma::LoadLaneStep<kType>(t, x, b + mma::kWarps, lane, &next);
    int c[mma::kMTiles][mma::kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < mma::kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < mma::kNTiles; ++nt) MmaS8(step.a[mt], step.b[nt], c[mt][nt]);
    }
    mma::UpdateLane<kType>(t, x, b, lane, step, c, acc, acc_min);
    step = next;
  }
  // The cross-warp tree (mma_tiling.h): [slot][output][lane], conflict-free.
  __shared__ float partial[mma::kWarps / 2][mma::kLaneOutputs][mma::kWarpSize];
  __shared__ float partial_min[kHasMin ? mma::kWarps / 2 : 1][mma::kLaneOutputs][mma::kWarpSize];
  float* mine = &acc[0][0][0];
  float* mine_min = &acc_min[0][0][0];
#pragma unroll
  for (int offset = mma::kWarps / 2; offset > 0; offset /= 2) {
    if (warp >= offset && warp < 2 * offset) {
#pragma unroll
      for (int i = 0; i < mma::kLaneOutputs; ++i) {
        partial[warp - offset][i][lane] = mine[i];
        if constexpr (kHasMin) partial_min[warp - offset][i][lane] = mine_min[i];
      }
    }
    __syncthreads();
    if (warp < offset) {
#pragma unroll
      for (int i = 0; i < mma::kLaneOutputs; ++i) {
        mine[i] = matvec::Add(mine[i], partial[warp][i][lane]);
        if constexpr (kHasMin) mine_min[i] = matvec::Add(mine_min[i], partial_min[warp][i][lane]);
      }
    }
    __syncthreads();
  }
  if (warp != 0) return;
#pragma unroll
  for (int mt = 0; mt < mma::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < mma::kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int64_t row = 0, token = 0;
        if (!mma::OutputAt(t, lane, mt, nt, e, &row, &token)) continue;
        y[token * y_stride + row] = matvec::Block32Unit<kType>::Finish(
            matvec::Add(acc[mt][nt][e], 0.0f), matvec::Add(acc_min[mt][nt][e], 0.0f));
      }
    }
  }
}

}  // namespace

absl::Status LaunchMmaMatMul(const DeviceMatrix& w, const matvec::Q8View& xq, int64_t tokens,
                             float* y, int64_t y_stride, cudaStream_t stream) {
  mma::MmaGrid grid;
  if (absl::Status planned = mma::PlanMmaGrid(w.type, w.rows, w.cols, tokens, &grid);
      !planned.ok()) {
    return planned;
  }
  if (grid.row_tiles == 0 || grid.token_tiles == 0) return absl::OkStatus();
  if (reinterpret_cast<uintptr_t>(w.data) % 4 != 0 || reinterpret_cast<uintptr_t>(xq.qs) % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-core matmul (", GetGgmlTypeTraits(w.type).name,
                     "): weights or quantized activations not 4-byte aligned"));
  }
  mma::TileView t;
  t.w = static_cast<const uint8_t*>(w.data);
  t.row_bytes = static_cast<int64_t>(RowBytes(w.type, w.cols));
  t.rows = w.rows;
  t.cols = w.cols;
  t.tokens = tokens;
  const dim3 blocks(static_cast<unsigned>(grid.token_tiles), static_cast<unsigned>(grid.row_tiles));
  DiscardStaleCudaError();
  switch (w.type) {
    case GgmlType::kQ8_0:
      MmaMatMulKernel<GgmlType::kQ8_0><<<blocks, mma::kThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
    case GgmlType::kQ4_0:
      MmaMatMulKernel<GgmlType::kQ4_0><<<blocks, mma::kThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
    default:
      MmaMatMulKernel<GgmlType::kQ4_1><<<blocks, mma::kThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
  }
  return CudaLaunchStatus("MmaMatMulKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels
