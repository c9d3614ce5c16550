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

// The cross-warp tree of mma_tiling.h over kWarpsN warps through shared memory
// ([slot][output][lane], conflict-free), then warp 0 stores (FinishOutput).
template <typename Unit, int kWarpsN, bool kHasMin>
__device__ __forceinline__ void TreeAndStore(const mma::TileView& t, int warp, int lane,
                                             float (&acc)[mma::kMTiles][mma::kNTiles][4],
                                             float (&acc_min)[mma::kMTiles][mma::kNTiles][4],
                                             float* __restrict__ y, int64_t y_stride) {
  __shared__ float partial[kWarpsN / 2][mma::kLaneOutputs][mma::kWarpSize];
  __shared__ float partial_min[kHasMin ? kWarpsN / 2 : 1][mma::kLaneOutputs][mma::kWarpSize];
  float* mine = &acc[0][0][0];
  float* mine_min = &acc_min[0][0][0];
#pragma unroll
  for (int offset = kWarpsN / 2; offset > 0; offset /= 2) {
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
        y[token * y_stride + row] =
            mma::FinishOutput<Unit>(acc[mt][nt][e], kHasMin ? acc_min[mt][nt][e] : 0.0f);
      }
    }
  }
}

__device__ __forceinline__ void ZeroTile(float (&v)[mma::kMTiles][mma::kNTiles][4]) {
#pragma unroll
  for (int mt = 0; mt < mma::kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < mma::kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[mt][nt][e] = 0.0f;
    }
  }
}

// Per-32 types, a thin shell around mma_tiling.h: warp c runs chain c (blocks c, c + 16,
// ...) of the tile's outputs, loading the next block's fragments before it multiplies
// the current one (no effect on the arithmetic); then the tree.
template <GgmlType kType>
__global__ void __launch_bounds__(mma::kThreads, 1)
    MmaMatMulKernel(mma::TileView t, matvec::Q8View x, float* __restrict__ y, int64_t y_stride) {
  const int warp = static_cast<int>(threadIdx.x) / mma::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % mma::kWarpSize;
  t.tok0 = static_cast<int64_t>(blockIdx.x) * mma::kTileTokens;
  t.row0 = static_cast<int64_t>(blockIdx.y) * mma::kTileRows;
  float acc[mma::kMTiles][mma::kNTiles][4], acc_min[mma::kMTiles][mma::kNTiles][4];
  ZeroTile(acc);
  ZeroTile(acc_min);
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
  TreeAndStore<matvec::Block32Unit<kType>, mma::kWarps, kType == GgmlType::kQ4_1>(
      t, warp, lane, acc, acc_min, y, y_stride);
}

// K-quants: warp c runs chain c (super-blocks c, c + 4, ...); per super-block, 8
// sub-blocks of kSubParts mma each, combined into exact integers, then the float step.
template <GgmlType kType>
__global__ void __launch_bounds__(mma::kSuperThreads, 3)
    MmaSuperBlockKernel(mma::TileView t, matvec::Q8View x, float* __restrict__ y,
                        int64_t y_stride) {
  const int warp = static_cast<int>(threadIdx.x) / mma::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % mma::kWarpSize;
  t.tok0 = static_cast<int64_t>(blockIdx.x) * mma::kTileTokens;
  t.row0 = static_cast<int64_t>(blockIdx.y) * mma::kTileRows;
  float acc[mma::kMTiles][mma::kNTiles][4], acc_min[mma::kMTiles][mma::kNTiles][4];
  ZeroTile(acc);
  ZeroTile(acc_min);
  const int64_t blocks = t.cols / 256;
  for (int64_t b = warp; b < blocks; b += mma::kSuperWarps) {
    int isum[mma::kMTiles][mma::kNTiles][4] = {}, imin[mma::kMTiles][mma::kNTiles][4] = {};
#pragma unroll 1
    for (int j = 0; j < 8; ++j) {
      mma::SubStep<kType> s;
      mma::LoadSubStep<kType>(t, x, b, j, lane, &s);
      int p[mma::kSubParts<kType>][mma::kMTiles][mma::kNTiles][4];
#pragma unroll
      for (int i = 0; i < mma::kSubParts<kType>; ++i) {
#pragma unroll
        for (int mt = 0; mt < mma::kMTiles; ++mt) {
          int a[4];
          mma::SubBlockA(s.a[mt], mma::SubPart<kType>(i), a);
#pragma unroll
          for (int nt = 0; nt < mma::kNTiles; ++nt) MmaS8(a, s.b[nt], p[i][mt][nt]);
        }
      }
      mma::CombineSubStep<kType>(s, p, isum, imin);
    }
    mma::UpdateSuperLane<kType>(t, x, b, lane, isum, imin, acc, acc_min);
  }
  TreeAndStore<matvec::SuperBlockUnit<kType>, mma::kSuperWarps, kType != GgmlType::kQ6_K>(
      t, warp, lane, acc, acc_min, y, y_stride);
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
    case GgmlType::kQ4_1:
      MmaMatMulKernel<GgmlType::kQ4_1><<<blocks, mma::kThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
    case GgmlType::kQ4_K:
      MmaSuperBlockKernel<GgmlType::kQ4_K>
          <<<blocks, mma::kSuperThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
    case GgmlType::kQ5_K:
      MmaSuperBlockKernel<GgmlType::kQ5_K>
          <<<blocks, mma::kSuperThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
    default:  // PlanMmaGrid admits no other type
      MmaSuperBlockKernel<GgmlType::kQ6_K>
          <<<blocks, mma::kSuperThreads, 0, stream>>>(t, xq, y, y_stride);
      break;
  }
  return CudaLaunchStatus("MmaMatMulKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels
