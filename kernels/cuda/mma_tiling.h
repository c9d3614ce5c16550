// The tensor-core matmul of the CUDA backend (prefill and batches of more than 16
// tokens) as plain host + device code: its tiling, fragment index math and
// reduction order, written once. The kernel (quant_mma.cu) is a thin shell that
// calls these functions per lane, issues `mma.sync` and exchanges partial sums
// through shared memory; EmulateMmaMatMul below calls the same functions with the
// lanes and warps of a thread block emulated in loops (the mma by its documented
// fragment layout), so CPU tests check the kernel's arithmetic without a GPU and
// a GPU test checks the kernel equals the emulation bit for bit.
//
//   if (mma::UseTensorCores(w.type, tokens)) { /* LaunchMmaMatMul (quant_mma.h) */ }
//
// What it computes, and why int8 MMA (not fp16 tiles or cuBLAS). The CUDA
// backend's contract is batch invariance: a token's logits are bitwise the same
// alone, in a batch or inside a verify block (docs/architecture.md; the matvec's
// header, matvec_tiling.h). A dequantize-to-fp16 GEMM (cuBLAS, Marlin) rounds
// weights x activations differently from the matvec, so a prompt's KV rows and a
// verify block past 16 tokens would differ from the same tokens decoded one by
// one, and greedy speculative decoding would no longer equal plain greedy
// decoding. This path instead multiplies the same int8 operands the matvec uses
// (the weights' quants as stored, the activations quantized per 32 by
// LaunchQuantizeQ8Blocks) with `mma.sync.m16n8k32.s8.s8.s32`: a quantization
// block is exactly one k = 32 step, so each (row, token, block) integer product is
// the exact int32 the matvec's dp4a forms (the approach of llama.cpp's MMQ). The
// float part then repeats the matvec's operations in the matvec's order:
//   - per block, Block32Unit<type>::Update (matvec_tiling.h), the same fma / mul;
//   - block b goes to chain c = b % 16, the chain of the matvec's leader lane 2c
//     (a lane's units are lane, lane + 32, ...; a block is 2 units), each chain
//     in increasing b;
//   - the 16 chains summed in the matvec's butterfly order: c with c ^ 8, then
//     ^ 4, ^ 2, ^ 1 (lane offsets 16, 8, 4, 2 between the leader lanes), then
//     + 0.0f (offset 1 adds the odd lanes, which hold +0.0); acc_min alike;
//   - y = Block32Unit<type>::Finish(acc, acc_min).
// So y is bitwise the matvec's for every token count and both paths are one
// arithmetic: which one runs is a speed choice only, and every token of a
// 512-token prefill has the bits it would have alone (MmaEmulationTest proves it
// on the CPU against matvec::EmulateMatVec; the gpu test against the kernel).
// The price of the fixed order is the float epilogue per block (one mul, one
// fma, one more fma for Q4_1), as llama.cpp's MMQ pays too.
//
// Tiling. A thread block of kWarps = 16 warps computes kTileRows = 32 weight rows
// x kTileTokens = 16 tokens: warp c computes chain c (blocks c, c + 16, ...) of
// every output of the tile, as two m16 x two n8 fragments; at the end the 16
// warps' partial sums meet in shared memory in the order above. Each lane loads
// its own fragments straight from global memory: a Q4_0 / Q4_1 lane reads 4
// bytes of quants per row and block (low nibbles: k 4q..4q+3, high nibbles: k 16
// + 4q.., the block layout of quant_blocks.h fits the mma's A layout), a Q8_0
// lane 2 x 4; activations 2 x 4 bytes per token. The grid runs the token tiles
// in x, so the blocks resident together share weight rows (L2 hits) and the
// activations stay in L2.
//
// K-quants (Q4_K, Q5_K, Q6_K): the same scheme per super-block of 256 (the K-quants
// section below): 8 sub-blocks of one k = 32 mma each (Q6_K: two, one per 16-element
// half, as its scales are per 16), the exact integers combined with the row's 6- or
// 8-bit scales as the matvec's group sum does, SuperBlockUnit::Update per
// super-block, 4 chains (the matvec's leader lanes 0, 8, 16, 24) in 4 warps of 128
// threads, the butterfly's offsets 16 and 8 between them and three + 0.0f.
//
// Types: every quantized type of the device (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K);
// the float types run the matvec for every token count.
#ifndef SPLITSPEC_KERNELS_CUDA_MMA_TILING_H_
#define SPLITSPEC_KERNELS_CUDA_MMA_TILING_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/ggml_types.h"
#include "kernels/cuda/matvec_tiling.h"

namespace splitspec::kernels::mma {

using matvec::Block32Unit;
using matvec::Q8View;

inline constexpr int kWarpSize = matvec::kWarpSize;
// One warp per chain of the matvec, i.e. per leader lane of its groups: 16 for the
// per-32 types (a block is a group of 2 units: leader lanes 0, 2, ..., 30), 4 for the
// K-quants (a super-block is a group of 8 sub-blocks: leader lanes 0, 8, 16, 24).
inline constexpr int kWarps = kWarpSize / Block32Unit<GgmlType::kQ4_1>::kGroup;
inline constexpr int kSuperWarps = kWarpSize / matvec::SuperBlockUnit<GgmlType::kQ4_K>::kGroup;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kSuperThreads = kSuperWarps * kWarpSize;
inline constexpr int kMTiles = 2;  // m16 fragments per tile: 32 weight rows
inline constexpr int kNTiles = 2;  // n8 fragments per tile: 16 tokens
inline constexpr int kTileRows = 16 * kMTiles;
inline constexpr int kTileTokens = 8 * kNTiles;
inline constexpr int kLaneOutputs = kMTiles * kNTiles * 4;  // C registers per lane
inline constexpr int64_t kMaxRowTiles = 65535;              // grid y

static_assert(kWarps == 16 && kSuperWarps == 4,
              "the cross-warp tree below is the matvec's butterfly over its leader lanes");

// Lane offsets of the matvec's butterfly below its group size (1 for groups of 2, 4, 2
// and 1 for groups of 8): each adds the sum of non-leader lanes, +0.0f (FinishOutput).
template <int kGroup>
inline constexpr int kZeroAdds = kGroup == 2   ? 1
                                 : kGroup == 8 ? 3
                                               : -1;

// ---------------------------------------------------------------- the rule
SPLITSPEC_HD constexpr bool IsSuperBlockType(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
}

// True for the weight types the tensor-core kernel handles: every quantized type of
// the device (the float types run the matvec for every token count).
inline bool MmaSupportsType(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 ||
         IsSuperBlockType(type);
}

// The one place that picks the path of a matmul. Both paths give the same bits
// (above), so this is a speed rule: up to matvec::kMaxTokens (16) tokens the
// matvec reads each weight once (a decode step, a verify block of k + 1 <= 16);
// beyond, it re-reads the weights per tile of 16 tokens on dp4a, and the tensor
// cores take over (prefill, large batches, verify blocks of 17 and more).
inline bool UseTensorCores(GgmlType type, int64_t tokens) {
  return MmaSupportsType(type) && tokens > matvec::kMaxTokens;
}

// ---------------------------------------------------------------- the grid
struct MmaGrid {
  int64_t token_tiles = 0;  // grid x
  int64_t row_tiles = 0;    // grid y
};

// The grid of one matmul; InvalidArgument (naming the value) for a type without
// the kernel, cols not a positive multiple of the type's block (32 or 256), or more
// than kMaxRowTiles * 32 rows.
inline absl::Status PlanMmaGrid(GgmlType type, int64_t rows, int64_t cols, int64_t tokens,
                                MmaGrid* grid) {
  if (!MmaSupportsType(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-core matmul: no kernel for ggml type ", GetGgmlTypeTraits(type).name));
  }
  const int block = GetGgmlTypeTraits(type).block_size;
  if (cols <= 0 || cols % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-core matmul (",
                                                   GetGgmlTypeTraits(type).name, "): cols ", cols,
                                                   " not a positive multiple of ", block));
  }
  if (rows < 0 || tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-core matmul: rows ", rows, " or tokens ", tokens, " < 0"));
  }
  grid->row_tiles = (rows + kTileRows - 1) / kTileRows;
  grid->token_tiles = (tokens + kTileTokens - 1) / kTileTokens;
  if (grid->row_tiles > kMaxRowTiles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor-core matmul: ", rows, " rows exceed the limit of ", kMaxRowTiles * kTileRows));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- fragments
// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (PTX ISA, "Matrix fragments for
// mma.m16n8k32"), for lane = 4 * g + q:
//   A (16 x 32, 4 registers of 4 bytes): a[r] holds row g + 8 * (r % 2), k 4q + 16 * (r / 2) + 0..3
//   B (32 x 8, 2 registers):             b[r] holds k 4q + 16 * r + 0..3, column g
//   C (16 x 8, 4 int32):                 c[e] is row g + 8 * (e / 2), column 2q + e % 2
SPLITSPEC_HD int ARow(int lane, int reg) { return lane / 4 + 8 * (reg % 2); }
SPLITSPEC_HD int AK(int lane, int reg) { return 4 * (lane % 4) + 16 * (reg / 2); }
SPLITSPEC_HD int BCol(int lane) { return lane / 4; }
SPLITSPEC_HD int BK(int lane, int reg) { return 4 * (lane % 4) + 16 * reg; }
SPLITSPEC_HD int CRow(int lane, int e) { return lane / 4 + 8 * (e / 2); }
SPLITSPEC_HD int CCol(int lane, int e) { return 2 * (lane % 4) + e % 2; }

// The quants of one weight row's block as the A registers want them: k 4q..4q+3
// (lo) and 16 + 4q.. (hi), int8 values (Q4_0 / Q4_1 nibbles 0..15 unchanged; Q4_0's
// - 8 is Block32Unit::Update's - 8 * sum(q_x), as in the matvec).
template <GgmlType kType>
SPLITSPEC_HD void LoadRowQuants(const uint8_t* block, int q, int* lo, int* hi) {
  if constexpr (kType == GgmlType::kQ8_0) {
    *lo = matvec::LoadU16Pair(block + 2 + 4 * q);
    *hi = matvec::LoadU16Pair(block + 18 + 4 * q);
  } else {
    // quant_blocks.h: byte i holds element i (low nibble) and element 16 + i (high).
    const int v = kType == GgmlType::kQ4_0 ? matvec::LoadU16Pair(block + 2 + 4 * q)
                                           : matvec::LoadI32(block + 4 + 4 * q);
    *lo = v & 0x0F0F0F0F;
    *hi = (v >> 4) & 0x0F0F0F0F;
  }
}

// A row's block scale (and Q4_1's min), as Block32Unit::Load reads them.
template <GgmlType kType>
SPLITSPEC_HD typename Block32Unit<kType>::Weights LoadRowScales(const uint8_t* block) {
  typename Block32Unit<kType>::Weights w;
  w.d = matvec::HalfToFloat(matvec::LoadU16(block));
  if constexpr (kType == GgmlType::kQ4_1) w.m = matvec::HalfToFloat(matvec::LoadU16(block + 2));
  return w;
}

// What one lane holds for one block step of one warp.
template <GgmlType kType>
struct LaneStep {
  int a[kMTiles][4] = {};
  int b[kNTiles][2] = {};
  typename Block32Unit<kType>::Weights w[kMTiles][2];  // rows g and g + 8 of each m16 fragment
};

// The tile's geometry: row0 / tok0 its first row / token; rows past the matrix
// (tokens past the batch) read the last row (token) instead and are never stored.
struct TileView {
  const uint8_t* w = nullptr;
  int64_t row_bytes = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t tokens = 0;
  int64_t row0 = 0;
  int64_t tok0 = 0;
};

SPLITSPEC_HD int64_t ClampRow(const TileView& t, int64_t r) { return r < t.rows ? r : t.rows - 1; }
SPLITSPEC_HD int64_t ClampToken(const TileView& t, int64_t k) {
  return k < t.tokens ? k : t.tokens - 1;
}

// Lane `lane`'s fragments and row scales of block b.
template <GgmlType kType>
SPLITSPEC_HD void LoadLaneStep(const TileView& t, const Q8View& x, int64_t b, int lane,
                               LaneStep<kType>* s) {
  constexpr int kBlockBytes = Block32Unit<kType>::kBlockBytes;
  const int q = lane % 4;
  for (int mt = 0; mt < kMTiles; ++mt) {
    for (int half = 0; half < 2; ++half) {  // rows g (registers 0, 2) and g + 8 (1, 3)
      const int64_t r = ClampRow(t, t.row0 + 16 * mt + ARow(lane, half));
      const uint8_t* block = t.w + r * t.row_bytes + b * kBlockBytes;
      LoadRowQuants<kType>(block, q, &s->a[mt][half], &s->a[mt][half + 2]);
      s->w[mt][half] = LoadRowScales<kType>(block);
    }
  }
  for (int nt = 0; nt < kNTiles; ++nt) {
    const int64_t token = ClampToken(t, t.tok0 + 8 * nt + BCol(lane));
    const int8_t* xb = x.qs + token * t.cols + 32 * b;
    for (int reg = 0; reg < 2; ++reg) s->b[nt][reg] = matvec::LoadI32(xb + BK(lane, reg));
  }
}

// The float step of block b for the lane's outputs (c: the mma's int32 results,
// c[mt][nt][e]; acc / acc_min indexed the same way): Block32Unit::Update.
template <GgmlType kType>
SPLITSPEC_HD void UpdateLane(const TileView& t, const Q8View& x, int64_t b, int lane,
                             const LaneStep<kType>& s, const int (&c)[kMTiles][kNTiles][4],
                             float (&acc)[kMTiles][kNTiles][4],
                             float (&acc_min)[kMTiles][kNTiles][4]) {
  const int64_t x_blocks = t.cols / 32;
  for (int nt = 0; nt < kNTiles; ++nt) {
    for (int e = 0; e < 4; ++e) {
      const int64_t token = ClampToken(t, t.tok0 + 8 * nt + CCol(lane, e));
      for (int mt = 0; mt < kMTiles; ++mt) {
        Block32Unit<kType>::Update(s.w[mt][e / 2], c[mt][nt][e], 0, x, token * x_blocks + b,
                                   &acc[mt][nt][e], &acc_min[mt][nt][e]);
      }
    }
  }
}

// Where the lane's output (mt, nt, e) goes; false past the matrix or the batch.
SPLITSPEC_HD bool OutputAt(const TileView& t, int lane, int mt, int nt, int e, int64_t* row,
                           int64_t* token) {
  *row = t.row0 + 16 * mt + CRow(lane, e);
  *token = t.tok0 + 8 * nt + CCol(lane, e);
  return *row < t.rows && *token < t.tokens;
}

// ---------------------------------------------------------------- K-quants
// A super-block of 256 is a group of 8 sub-blocks of 32, each one k = 32 mma step:
// the mma gives each sub-block's exact dot (Q6_K: each half's, one mma with the other
// half's A registers zeroed, as its scales are per 16), the lane combines them with
// the row's integer scales into the matvec's exact isum / imin (Q4_K / Q5_K's xsum,
// the sum of a token's 32 quants, from one more mma with A all ones), and the
// super-block's float step is SuperBlockUnit::Update. Chains: super-block b feeds
// chain b % 4 (the matvec's leader lane 8 (b % 4)).
template <GgmlType kType>
using SuperUnit = matvec::SuperBlockUnit<kType>;

// Four Q6_K quants (minus 32) at byte offset `off` of a sub-block's 32: the low or
// high nibbles of ql, two bits of qh (matvec::SuperBlockUnit<kQ6_K>::Load's bits).
SPLITSPEC_HD int Q6Word(const uint8_t* ql, const uint8_t* qh, int off, int k) {
  const uint32_t low =
      (static_cast<uint32_t>(matvec::LoadU16Pair(ql + off)) >> (4 * (k / 2))) & 0x0F0F0F0Fu;
  const uint32_t high =
      ((static_cast<uint32_t>(matvec::LoadU16Pair(qh + off)) >> (2 * k)) & 0x03030303u) << 4;
  return matvec::SubtractBytes32(low | high);
}

// Sub-block j's quants of one row as the A registers want them: elements 4q..4q+3
// (lo) and 16 + 4q.. (hi), int8.
template <GgmlType kType>
SPLITSPEC_HD void LoadSubBlockQuants(const uint8_t* block, int j, int q, int* lo, int* hi) {
  if constexpr (kType == GgmlType::kQ6_K) {
    const int half = j / 4;
    const int k = j % 4;
    const uint8_t* ql = block + 64 * half + 32 * (k % 2);
    const uint8_t* qh = block + 128 + 32 * half;
    *lo = Q6Word(ql, qh, 4 * q, k);
    *hi = Q6Word(ql, qh, 16 + 4 * q, k);
  } else {
    const uint8_t* qs = block + (kType == GgmlType::kQ5_K ? 48 : 16) + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    uint32_t v[2];
    for (int h = 0; h < 2; ++h) {
      const int off = 16 * h + 4 * q;
      v[h] = (static_cast<uint32_t>(matvec::LoadI32(qs + off)) >> shift) & 0x0F0F0F0Fu;
      if constexpr (kType == GgmlType::kQ5_K) {
        v[h] |= ((static_cast<uint32_t>(matvec::LoadI32(block + 16 + off)) >> j) & 0x01010101u)
                << 4;
      }
    }
    *lo = static_cast<int>(v[0]);
    *hi = static_cast<int>(v[1]);
  }
}

// Sub-block j's integer scales: Q6_K's two (per 16), Q4_K / Q5_K's scale and min.
struct SubScales {
  int scale0 = 0, scale1 = 0, min = 0;
};

template <GgmlType kType>
SPLITSPEC_HD SubScales LoadSubBlockScales(const uint8_t* block, int j) {
  SubScales s;
  if constexpr (kType == GgmlType::kQ6_K) {
    s.scale0 = static_cast<int8_t>(block[192 + 2 * j]);
    s.scale1 = static_cast<int8_t>(block[192 + 2 * j + 1]);
  } else {
    matvec::ScaleMinK4(block + 4, j, &s.scale0, &s.min);
  }
  return s;
}

// A row's super-block scales (d, and dmin for Q4_K / Q5_K), as SuperBlockUnit::Load.
template <GgmlType kType>
SPLITSPEC_HD typename SuperUnit<kType>::Weights LoadSuperScales(const uint8_t* block) {
  typename SuperUnit<kType>::Weights w;
  if constexpr (kType == GgmlType::kQ6_K) {
    w.d = matvec::HalfToFloat(matvec::LoadU16(block + 208));
  } else {
    w.d = matvec::HalfToFloat(matvec::LoadU16(block));
    w.dmin = matvec::HalfToFloat(matvec::LoadU16(block + 2));
  }
  return w;
}

// What one lane holds for sub-block j of super-block b.
template <GgmlType kType>
struct SubStep {
  int a[kMTiles][4] = {};
  int b[kNTiles][2] = {};
  SubScales s[kMTiles][2];  // rows g and g + 8 of each m16 fragment
};

template <GgmlType kType>
SPLITSPEC_HD const uint8_t* SuperBlockOfRow(const TileView& t, int64_t row, int64_t b) {
  return t.w + ClampRow(t, row) * t.row_bytes + b * SuperUnit<kType>::kBlockBytes;
}

template <GgmlType kType>
SPLITSPEC_HD void LoadSubStep(const TileView& t, const Q8View& x, int64_t b, int j, int lane,
                              SubStep<kType>* s) {
  const int q = lane % 4;
  for (int mt = 0; mt < kMTiles; ++mt) {
    for (int half = 0; half < 2; ++half) {
      const uint8_t* block = SuperBlockOfRow<kType>(t, t.row0 + 16 * mt + ARow(lane, half), b);
      LoadSubBlockQuants<kType>(block, j, q, &s->a[mt][half], &s->a[mt][half + 2]);
      s->s[mt][half] = LoadSubBlockScales<kType>(block, j);
    }
  }
  for (int nt = 0; nt < kNTiles; ++nt) {
    const int64_t token = ClampToken(t, t.tok0 + 8 * nt + BCol(lane));
    const int8_t* xb = x.qs + token * t.cols + 256 * b + 32 * j;
    for (int reg = 0; reg < 2; ++reg) s->b[nt][reg] = matvec::LoadI32(xb + BK(lane, reg));
  }
}

// The A registers of one mma of a sub-block: part 0 all 32 elements (Q4_K / Q5_K),
// parts 1 and 2 the first and second 16 (Q6_K: registers 2, 3 or 0, 1 zeroed), part
// 3 all ones (Q4_K / Q5_K's xsum: every row of C is the token's sum of quants).
SPLITSPEC_HD void SubBlockA(const int (&a)[4], int part, int (&out)[4]) {
  for (int r = 0; r < 4; ++r) {
    out[r] = part == 3 ? 0x01010101 : (part == 1 && r >= 2) || (part == 2 && r < 2) ? 0 : a[r];
  }
}

// The mma parts a type runs per sub-block, in order (SubBlockA's numbering).
template <GgmlType kType>
inline constexpr int kSubParts = 2;  // Q4_K / Q5_K: parts 0 and 3; Q6_K: parts 1 and 2

template <GgmlType kType>
SPLITSPEC_HD int SubPart(int i) {
  return kType == GgmlType::kQ6_K ? 1 + i : i == 0 ? 0 : 3;
}

// The lane's integer sums after sub-block j: isum += scale * dot (Q6_K: scale0 * dot of
// the first 16 + scale1 * dot of the second), imin += min * xsum. p[i]: the mma of part
// SubPart(i), C registers per (mt, nt).
template <GgmlType kType>
SPLITSPEC_HD void CombineSubStep(const SubStep<kType>& s,
                                 const int (&p)[kSubParts<kType>][kMTiles][kNTiles][4],
                                 int (&isum)[kMTiles][kNTiles][4],
                                 int (&imin)[kMTiles][kNTiles][4]) {
  for (int mt = 0; mt < kMTiles; ++mt) {
    for (int nt = 0; nt < kNTiles; ++nt) {
      for (int e = 0; e < 4; ++e) {
        const SubScales& sc = s.s[mt][e / 2];
        if constexpr (kType == GgmlType::kQ6_K) {
          isum[mt][nt][e] += sc.scale0 * p[0][mt][nt][e] + sc.scale1 * p[1][mt][nt][e];
        } else {
          isum[mt][nt][e] += sc.scale0 * p[0][mt][nt][e];
          imin[mt][nt][e] += sc.min * p[1][mt][nt][e];
        }
      }
    }
  }
}

// The super-block's float step for the lane's outputs: SuperBlockUnit::Update.
template <GgmlType kType>
SPLITSPEC_HD void UpdateSuperLane(const TileView& t, const Q8View& x, int64_t b, int lane,
                                  const int (&isum)[kMTiles][kNTiles][4],
                                  const int (&imin)[kMTiles][kNTiles][4],
                                  float (&acc)[kMTiles][kNTiles][4],
                                  float (&acc_min)[kMTiles][kNTiles][4]) {
  const int64_t x_blocks = t.cols / 256;
  for (int mt = 0; mt < kMTiles; ++mt) {
    for (int half = 0; half < 2; ++half) {
      const typename SuperUnit<kType>::Weights w = LoadSuperScales<kType>(
          SuperBlockOfRow<kType>(t, t.row0 + 16 * mt + CRow(lane, 2 * half), b));
      for (int nt = 0; nt < kNTiles; ++nt) {
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          const int64_t token = ClampToken(t, t.tok0 + 8 * nt + CCol(lane, e));
          SuperUnit<kType>::Update(w, isum[mt][nt][e], imin[mt][nt][e], x, token * x_blocks + b,
                                   &acc[mt][nt][e], &acc_min[mt][nt][e]);
        }
      }
    }
  }
}

// The output of one (row, token) from the tree's sums: the matvec's last kZeroAdds
// butterfly steps add the non-leader lanes' +0.0f, then Unit::Finish.
template <typename Unit>
SPLITSPEC_HD float FinishOutput(float acc, float acc_min) {
  for (int i = 0; i < kZeroAdds<Unit::kGroup>; ++i) {
    acc = matvec::Add(acc, 0.0f);
    acc_min = matvec::Add(acc_min, 0.0f);
  }
  return Unit::Finish(acc, acc_min);
}

// The cross-warp tree: for offset = warps / 2, ..., 2, 1 (8, 4, 2, 1 for the per-32
// types, 2, 1 for the K-quants), warp c < offset adds warp c + offset's value (the
// matvec's butterfly between the leader lanes of chains c and c ^ offset; float
// addition is commutative, so which side adds is no matter); then FinishOutput.

// ---------------------------------------------------------------- CPU emulation
// One m16n8k32 mma of a warp from its 32 lanes' registers, by the layout above.
inline void EmulateMma(const int (&a)[kWarpSize][4], const int (&b)[kWarpSize][2],
                       int (&c)[kWarpSize][4]) {
  int8_t am[16][32], bm[32][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int i = 0; i < 4; ++i) {
        am[ARow(lane, reg)][AK(lane, reg) + i] =
            static_cast<int8_t>(static_cast<uint32_t>(a[lane][reg]) >> (8 * i));
      }
    }
    for (int reg = 0; reg < 2; ++reg) {
      for (int i = 0; i < 4; ++i) {
        bm[BK(lane, reg) + i][BCol(lane)] =
            static_cast<int8_t>(static_cast<uint32_t>(b[lane][reg]) >> (8 * i));
      }
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int e = 0; e < 4; ++e) {
      int sum = 0;
      for (int k = 0; k < 32; ++k) sum += am[CRow(lane, e)][k] * bm[k][CCol(lane, e)];
      c[lane][e] = sum;
    }
  }
}

// What each lane of each warp holds after its chain: [warp * 32 + lane].
struct EmulatedAcc {
  float v[kMTiles][kNTiles][4] = {};
};

// The cross-warp tree over `warps` warps and the stores of warp 0's lanes.
template <typename Unit>
void EmulateTreeAndStore(const TileView& t, int warps, std::vector<EmulatedAcc>& acc,
                         std::vector<EmulatedAcc>& acc_min, float* y, int64_t y_stride) {
  for (int offset = warps / 2; offset > 0; offset /= 2) {
    for (int warp = 0; warp < offset; ++warp) {
      for (int lane = 0; lane < kWarpSize; ++lane) {
        float* mine = &acc[warp * kWarpSize + lane].v[0][0][0];
        float* mine_min = &acc_min[warp * kWarpSize + lane].v[0][0][0];
        const float* other = &acc[(warp + offset) * kWarpSize + lane].v[0][0][0];
        const float* other_min = &acc_min[(warp + offset) * kWarpSize + lane].v[0][0][0];
        for (int i = 0; i < kLaneOutputs; ++i) {
          mine[i] = matvec::Add(mine[i], other[i]);
          mine_min[i] = matvec::Add(mine_min[i], other_min[i]);
        }
      }
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int mt = 0; mt < kMTiles; ++mt) {
      for (int nt = 0; nt < kNTiles; ++nt) {
        for (int e = 0; e < 4; ++e) {
          int64_t row = 0, token = 0;
          if (!OutputAt(t, lane, mt, nt, e, &row, &token)) continue;
          y[token * y_stride + row] =
              FinishOutput<Unit>(acc[lane].v[mt][nt][e], acc_min[lane].v[mt][nt][e]);
        }
      }
    }
  }
}

template <GgmlType kType>
void EmulateMmaTile(const TileView& t, const Q8View& x, float* y, int64_t y_stride) {
  std::vector<EmulatedAcc> acc(kWarps * kWarpSize), acc_min(kWarps * kWarpSize);
  const int64_t blocks = t.cols / 32;
  for (int warp = 0; warp < kWarps; ++warp) {
    for (int64_t b = warp; b < blocks; b += kWarps) {
      std::vector<LaneStep<kType>> steps(kWarpSize);
      for (int lane = 0; lane < kWarpSize; ++lane) LoadLaneStep<kType>(t, x, b, lane, &steps[lane]);
      int c[kWarpSize][kMTiles][kNTiles][4];
      for (int mt = 0; mt < kMTiles; ++mt) {
        for (int nt = 0; nt < kNTiles; ++nt) {
          int a[kWarpSize][4], bb[kWarpSize][2], cc[kWarpSize][4];
          for (int lane = 0; lane < kWarpSize; ++lane) {
            std::memcpy(a[lane], steps[lane].a[mt], sizeof(a[lane]));
            std::memcpy(bb[lane], steps[lane].b[nt], sizeof(bb[lane]));
          }
          EmulateMma(a, bb, cc);
          for (int lane = 0; lane < kWarpSize; ++lane) {
            std::memcpy(c[lane][mt][nt], cc[lane], sizeof(cc[lane]));
          }
        }
      }
      for (int lane = 0; lane < kWarpSize; ++lane) {
        UpdateLane<kType>(t, x, b, lane, steps[lane], c[lane], acc[warp * kWarpSize + lane].v,
                          acc_min[warp * kWarpSize + lane].v);
      }
    }
  }
  EmulateTreeAndStore<Block32Unit<kType>>(t, kWarps, acc, acc_min, y, y_stride);
}

template <GgmlType kType>
void EmulateSuperTile(const TileView& t, const Q8View& x, float* y, int64_t y_stride) {
  struct LaneInts {
    int v[kMTiles][kNTiles][4] = {};
  };
  struct LaneParts {
    int v[kSubParts<kType>][kMTiles][kNTiles][4] = {};
  };
  std::vector<EmulatedAcc> acc(kSuperWarps * kWarpSize), acc_min(kSuperWarps * kWarpSize);
  const int64_t blocks = t.cols / 256;
  for (int warp = 0; warp < kSuperWarps; ++warp) {
    for (int64_t b = warp; b < blocks; b += kSuperWarps) {
      std::vector<LaneInts> isum(kWarpSize), imin(kWarpSize);
      for (int j = 0; j < 8; ++j) {
        std::vector<SubStep<kType>> steps(kWarpSize);
        for (int lane = 0; lane < kWarpSize; ++lane) {
          LoadSubStep<kType>(t, x, b, j, lane, &steps[lane]);
        }
        std::vector<LaneParts> parts(kWarpSize);
        for (int i = 0; i < kSubParts<kType>; ++i) {
          for (int mt = 0; mt < kMTiles; ++mt) {
            for (int nt = 0; nt < kNTiles; ++nt) {
              int a[kWarpSize][4], bb[kWarpSize][2], cc[kWarpSize][4];
              for (int lane = 0; lane < kWarpSize; ++lane) {
                SubBlockA(steps[lane].a[mt], SubPart<kType>(i), a[lane]);
                std::memcpy(bb[lane], steps[lane].b[nt], sizeof(bb[lane]));
              }
              EmulateMma(a, bb, cc);
              for (int lane = 0; lane < kWarpSize; ++lane) {
                std::memcpy(parts[lane].v[i][mt][nt], cc[lane], sizeof(cc[lane]));
              }
            }
          }
        }
        for (int lane = 0; lane < kWarpSize; ++lane) {
          CombineSubStep<kType>(steps[lane], parts[lane].v, isum[lane].v, imin[lane].v);
        }
      }
      for (int lane = 0; lane < kWarpSize; ++lane) {
        UpdateSuperLane<kType>(t, x, b, lane, isum[lane].v, imin[lane].v,
                               acc[warp * kWarpSize + lane].v, acc_min[warp * kWarpSize + lane].v);
      }
    }
  }
  EmulateTreeAndStore<SuperUnit<kType>>(t, kSuperWarps, acc, acc_min, y, y_stride);
}

// y[t * y_stride + r] for r < rows, t < tokens, as the tensor-core kernel computes
// it, tile by tile. xq: the activations quantized per 32 (per 256 for the K-quants;
// matvec::QuantizeOnHost or a device copy). REQUIRES: MmaSupportsType(type), cols a
// multiple of the type's block, rows, tokens >= 1.
inline void EmulateMmaMatMul(GgmlType type, const void* w, int64_t rows, int64_t cols,
                             const Q8View& xq, int64_t tokens, float* y, int64_t y_stride) {
  TileView t;
  t.w = static_cast<const uint8_t*>(w);
  t.row_bytes = static_cast<int64_t>(RowBytes(type, cols));
  t.rows = rows;
  t.cols = cols;
  t.tokens = tokens;
  for (t.row0 = 0; t.row0 < rows; t.row0 += kTileRows) {
    for (t.tok0 = 0; t.tok0 < tokens; t.tok0 += kTileTokens) {
      switch (type) {
        case GgmlType::kQ8_0:
          EmulateMmaTile<GgmlType::kQ8_0>(t, xq, y, y_stride);
          break;
        case GgmlType::kQ4_0:
          EmulateMmaTile<GgmlType::kQ4_0>(t, xq, y, y_stride);
          break;
        case GgmlType::kQ4_1:
          EmulateMmaTile<GgmlType::kQ4_1>(t, xq, y, y_stride);
          break;
        case GgmlType::kQ4_K:
          EmulateSuperTile<GgmlType::kQ4_K>(t, xq, y, y_stride);
          break;
        case GgmlType::kQ5_K:
          EmulateSuperTile<GgmlType::kQ5_K>(t, xq, y, y_stride);
          break;
        default:
          EmulateSuperTile<GgmlType::kQ6_K>(t, xq, y, y_stride);
          break;
      }
    }
  }
}

}  // namespace splitspec::kernels::mma

#endif  // SPLITSPEC_KERNELS_CUDA_MMA_TILING_H_
