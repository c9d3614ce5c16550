// Which launches of the weight-streaming matvec (matvec_tiling.h) one call of
// several matmuls over the same activations makes: plain C++, tested on the CPU.
//
//   ASSIGN_OR_RETURN(std::vector<MatVecLaunch> launches,
//                    PlanMatVecLaunches({{q.type, q.rows, q.cols}, {k...}, {v...}}, tokens));
//   for (const MatVecLaunch& l : launches) {
//     // one kernel compiled for l.tile_cols tokens: l.jobs, grid (l.row_blocks, l.token_tiles)
//   }
//
// Rules.
//  - One path for every token count: tokens run in tiles of kMaxTokens (16), a
//    warp per (weight row, tile) and kRowsPerBlock rows per thread block, so
//    1..16 tokens (a decode step, a batch of up to 16, a verify block of
//    k + 1 <= 16) read each weight once, and more tokens read it once per tile.
//    The kernel is compiled for tiles of 1, 2, 4, 8 and 16 tokens and the launch
//    takes the narrowest that holds min(tokens, 16) (TileColumns): a decode step
//    keeps one token's accumulators in registers, not sixteen. The tile width
//    changes no arithmetic of a token (matvec_tiling.h). Batch invariance (a
//    token's logits the same bits alone or in any batch) is a contract of the
//    CUDA backend, so the second kernel, the tensor cores for the quantized types
//    beyond 16 tokens (mma_tiling.h, picked by mma::UseTensorCores in
//    LaunchMatMuls, one launch per matrix), repeats this kernel's arithmetic bit
//    for bit; the launches planned here for those types and token counts run there.
//  - Jobs that read the same activations with the same weight type and cols (Q/K/V,
//    gate/up) share one launch, up to kMaxFusedJobs, in the order given: one pass
//    over x for all of them. Fusing never changes a row's bits (each thread
//    block computes one row of one matrix; which launch it is in does not enter
//    its arithmetic).
//  - Errors (InvalidArgument, naming the job and value): a type without a kernel,
//    cols not a multiple of the type's block, tokens < 0, more token tiles than a
//    grid's y dimension holds (65535) or more rows in one launch than 2^31 - 1.
#ifndef SPLITSPEC_KERNELS_CUDA_MATVEC_PLAN_H_
#define SPLITSPEC_KERNELS_CUDA_MATVEC_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/cpu/ggml_types.h"
#include "kernels/cuda/matvec_tiling.h"

namespace splitspec::kernels::matvec {

inline constexpr int64_t kMaxTokenTiles = 65535;
inline constexpr int64_t kMaxLaunchRows = 2147483647;

struct MatVecJobShape {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct MatVecLaunch {
  GgmlType type = GgmlType::kF32;
  int64_t cols = 0;
  std::vector<int> jobs;    // indices into the planned jobs, in order
  int64_t rows = 0;         // the jobs' rows together
  int64_t row_blocks = 0;   // grid x: ceil(rows / kRowsPerBlock)
  int64_t token_tiles = 0;  // grid y: ceil(tokens / kMaxTokens)
  int tile_cols = 1;        // the kernel's tile width: TileColumns(tokens)
};

inline int64_t TokenTiles(int64_t tokens) { return (tokens + kMaxTokens - 1) / kMaxTokens; }

// The launches for `jobs` over `tokens` tokens (none when tokens == 0 or a job has no rows).
inline absl::StatusOr<std::vector<MatVecLaunch>> PlanMatVecLaunches(
    absl::Span<const MatVecJobShape> jobs, int64_t tokens) {
  if (tokens < 0)
    return absl::InvalidArgumentError(absl::StrCat("matvec: tokens ", tokens, " < 0"));
  if (TokenTiles(tokens) > kMaxTokenTiles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "matvec: ", tokens, " tokens exceed the limit of ", kMaxTokenTiles * kMaxTokens));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatVecJobShape& j = jobs[i];
    const char* name = GetGgmlTypeTraits(j.type).name;
    if (!MatVecSupportsType(j.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("matvec job ", i, ": no CUDA matmul for ggml type ", name));
    }
    const int block = GetGgmlTypeTraits(j.type).block_size;
    if (j.cols <= 0 || j.cols % block != 0 || j.rows < 0) {
      return absl::InvalidArgumentError(absl::StrCat("matvec job ", i, " (", name, "): cols ",
                                                     j.cols, " not a positive multiple of ", block,
                                                     " or rows ", j.rows, " < 0"));
    }
    if (j.rows > kMaxLaunchRows) {
      return absl::InvalidArgumentError(
          absl::StrCat("matvec job ", i, ": ", j.rows, " rows exceed ", kMaxLaunchRows));
    }
  }
  std::vector<MatVecLaunch> launches;
  if (tokens == 0) return launches;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatVecJobShape& j = jobs[i];
    if (j.rows == 0) continue;
    MatVecLaunch* into = nullptr;
    for (MatVecLaunch& l : launches) {
      if (l.type == j.type && l.cols == j.cols && l.jobs.size() < kMaxFusedJobs &&
          l.rows + j.rows <= kMaxLaunchRows) {
        into = &l;
        break;
      }
    }
    if (into == nullptr) {
      launches.push_back(
          MatVecLaunch{j.type, j.cols, {}, 0, 0, TokenTiles(tokens), TileColumns(tokens)});
      into = &launches.back();
    }
    into->jobs.push_back(static_cast<int>(i));
    into->rows += j.rows;
  }
  for (MatVecLaunch& l : launches) l.row_blocks = (l.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return launches;
}

}  // namespace splitspec::kernels::matvec

#endif  // SPLITSPEC_KERNELS_CUDA_MATVEC_PLAN_H_
