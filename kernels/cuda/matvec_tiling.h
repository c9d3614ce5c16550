// The weight-streaming matvec of the CUDA backend as plain host + device code:
// its tiling, index math and reduction order, written once. The CUDA kernel
// (quant_matmul.cu) is a thin shell that calls these functions per thread and
// does the two exchanges CUDA has (warp shuffles, shared memory); the CPU
// emulation below (EmulateMatVec) calls the same functions with the threads of a
// thread block emulated in loops, so CPU tests check the kernel's arithmetic
// without a GPU, and a GPU test checks that the kernel equals the emulation bit
// for bit.
//
//   matvec::EmulateMatVec(GgmlType::kQ4_0, w, rows, cols, view, x, tokens, y, rows);
//
// Tiling. One warp computes one weight row for a tile of up to kMaxTokens = 16
// tokens; a thread block of kThreads = 128 threads holds kRowsPerBlock = 4 warps,
// so 4 rows. Each weight byte is read once per tile (a decode step or a verify
// block of up to 16 tokens reads the weights once), and every weight element it
// reads is used for all the tile's tokens from registers. A row is cut into units,
// the piece one lane loads per step, and units into groups, the units of one
// quantization block:
//   Q8_0, Q4_0, Q4_1  unit = half a block (16 elements), group = 2 units
//   Q4_K, Q5_K, Q6_K  unit = one 32-element sub-block, group = 8 units (256)
//   F32, F16, BF16    unit = 4 consecutive elements (the last one ragged), group 1
// Lane l takes units l, l + 32, l + 64, ... in increasing order, so the lanes of
// a group are neighbours (group leader: l % group == 0). A lane loads the weights
// of Unit::kStepsInFlight steps before it uses them (several loads in flight per
// lane); that changes no arithmetic.
//
// Reduction order, per (row, token), fixed by the weight type and cols alone:
//  1. each lane forms its unit's exact integer partial (dp4a); the group's
//     partials are added (integers: exact, any order) and the leader does the
//     block's float update with explicitly rounded operations, the CPU's block
//     formula (kernels/cpu/matmul.h, MatMulRowsReference):
//       Q8_0  acc = fma(d_w * d_x, isum, acc)
//       Q4_0  acc = fma(d_w * d_x, isum - 8 * sum(q_x), acc)
//       Q4_1  acc = fma(d_w * d_x, isum, acc); acc_min = fma(m_w, d_sum_x, acc_min)
//       K4/K5 acc = fma(isum, d_w * d_x, acc); acc_min = fma(imin, dmin_w * d_x, acc_min)
//       Q6_K  acc = fma(isum, d_w * d_x, acc)
//       float acc = fma(w_c, x_c, acc) for the unit's elements in order;
//  2. the warp's 32 accumulators by the xor butterfly 16, 8, 4, 2, 1 (lane l adds
//     lane l ^ offset; float addition is commutative, so every lane of a pair
//     gets the same bits);
//  3. y = acc (+ acc_min for Q4_1, - acc_min for Q4_K / Q5_K).
// Nothing here depends on the number of tokens, on the tile a token lands in, on
// the tile's width (the kernel is compiled for tiles of 1, 2, 4, 8 and 16 tokens,
// TileColumns) or on the other tokens: a token's output is bitwise the same alone,
// in a batch or inside a verify block (batch invariance), for every token count
// (more than 16 tokens run as several tiles of the same kernel). Against the CPU
// reference only the float order across blocks differs (bounds in the tests).
//
// Why this shape (llama.cpp's mul_mat_vec_q streams 3x faster than the first
// version of this kernel, one 128-thread block per row with a 16-token tile in
// registers whatever the token count; ptxas: 112-126 registers and a 104-byte
// stack frame per thread, so a quarter of an SM's warps resident, and a shared
// memory exchange plus a barrier per row): one warp per row needs no shared
// memory and no barrier, a tile as wide as the tokens it holds keeps a decode
// step's registers low (more warps resident, more loads in flight), and
// activations are read in 8- and 16-byte loads, 2-byte aligned quants in 4-byte
// ones (LoadWordsAt2). llama.cpp picks warps per row
// from the column count, which would make the order depend on the batch; here
// the shape is fixed. Activations are read from global memory (L1/L2 hits).
#ifndef SPLITSPEC_KERNELS_CUDA_MATVEC_TILING_H_
#define SPLITSPEC_KERNELS_CUDA_MATVEC_TILING_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/ggml_types.h"
#include "kernels/cpu/quant_blocks.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define SPLITSPEC_HD __host__ __device__ __forceinline__
#else
#define SPLITSPEC_HD inline
#endif

namespace splitspec::kernels::matvec {

inline constexpr int kWarpSize = 32;
inline constexpr int kRowsPerBlock = 4;  // one warp per row
inline constexpr int kThreads = kRowsPerBlock * kWarpSize;
inline constexpr int kMaxTokens = 16;  // tokens per pass over a weight row

// The tile width the kernel is compiled for that holds `tokens` tokens of one tile:
// 1, 2, 4, 8 or 16 (tokens beyond 16 run in tiles of 16).
constexpr int TileColumns(int64_t tokens) {
  return tokens <= 1 ? 1 : tokens <= 2 ? 2 : tokens <= 4 ? 4 : tokens <= 8 ? 8 : kMaxTokens;
}

// ---------------------------------------------------------------- exact primitives
// The same bits on both sides: IEEE single operations, rounded to nearest, no
// contraction (the host build has no FMA instructions, and every fma is explicit).

SPLITSPEC_HD float Mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

SPLITSPEC_HD float Add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

SPLITSPEC_HD float Sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

SPLITSPEC_HD float Fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Sum of the four signed byte products of a and b, plus c.
SPLITSPEC_HD int Dp4a(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i)) *
         static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
  }
  return c;
#endif
}

SPLITSPEC_HD float HalfToFloat(uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  return Fp16ToFloat(bits);
#endif
}

SPLITSPEC_HD float BfloatToFloat(uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return __bfloat162float(__ushort_as_bfloat16(bits));
#else
  return Bf16ToFloat(bits);
#endif
}

SPLITSPEC_HD uint16_t LoadU16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

// 4 bytes at a 2-byte aligned address, little-endian.
SPLITSPEC_HD int LoadU16Pair(const uint8_t* p) {
  return static_cast<int>(static_cast<uint32_t>(LoadU16(p)) |
                          (static_cast<uint32_t>(LoadU16(p + 2)) << 16));
}

// 4 bytes at a 4-byte aligned address.
SPLITSPEC_HD int LoadI32(const void* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const int*>(p);
#else
  int v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#endif
}

// kWords little-endian words at a 2-byte aligned address p in 4-byte loads (not
// 2 x kWords 2-byte ones): Q8_0, Q4_0 and Q6_K blocks are 34, 18 and 210 bytes, so
// their quants sit at 2 mod 4 in every other block. At p = 2 mod 4 the aligned
// words from p - 2 are shifted by 16 bits and the last two bytes come from a
// 2-byte load: reads only [p - 2, p + 4 * kWords), inside the allocation when it
// starts 4-byte aligned.
template <int kWords>
SPLITSPEC_HD void LoadWordsAt2(const uint8_t* p, int* out) {
  const bool odd = (reinterpret_cast<uintptr_t>(p) & 2u) != 0;
  const uint8_t* base = odd ? p - 2 : p;
  uint32_t w[kWords];
  for (int k = 0; k < kWords; ++k) w[k] = static_cast<uint32_t>(LoadI32(base + 4 * k));
  const uint32_t tail = odd ? LoadU16(p + 4 * kWords - 2) : 0u;
  for (int k = 0; k < kWords; ++k) {
    const uint32_t next = k + 1 < kWords ? w[k + 1] : tail;
    out[k] = static_cast<int>(odd ? (w[k] >> 16) | (next << 16) : w[k]);
  }
}

// 8 and 16 bytes at an 8- / 16-byte aligned address, as little-endian words.
SPLITSPEC_HD void LoadI32x2(const void* p, int* v) {
#if defined(__CUDA_ARCH__)
  const int2 w = *reinterpret_cast<const int2*>(p);
  v[0] = w.x;
  v[1] = w.y;
#else
  std::memcpy(v, p, 2 * sizeof(int));
#endif
}

SPLITSPEC_HD void LoadI32x4(const void* p, int* v) {
#if defined(__CUDA_ARCH__)
  const int4 w = *reinterpret_cast<const int4*>(p);
  v[0] = w.x;
  v[1] = w.y;
  v[2] = w.z;
  v[3] = w.w;
#else
  std::memcpy(v, p, 4 * sizeof(int));
#endif
}

// Each byte minus 32 (bytes in 0..63, the Q6_K quants): SWAR without borrows.
SPLITSPEC_HD int SubtractBytes32(uint32_t v) {
  return static_cast<int>(((v | 0x80808080u) - 0x20202020u) ^ 0x80808080u);
}

// ---------------------------------------------------------------- activations
// The quantized activations of a tile, as LaunchQuantizeQ8Blocks /
// LaunchQuantizeQ8SuperBlocks write them (quant_matmul.h): qs [tokens, cols]; per
// 32 (per 256 for the K-quants) d, and per 32 d_sum and sum. qs is 16-byte aligned
// (the kernel reads a unit's activations in 8- and 16-byte loads).
struct Q8View {
  const int8_t* qs = nullptr;
  const float* d = nullptr;
  const float* d_sum = nullptr;
  const float* sum = nullptr;
};

// ---------------------------------------------------------------- units
// Per quantized type: Weights (one unit's registers), Load, Partial (the unit's
// exact integers for one token) and Update (the group leader's float step).

SPLITSPEC_HD int NibbleDot(int w0, int w1, const int8_t* a, int half) {
  // Bytes 8h .. 8h + 7 of the block's 16: low nibbles are elements 8h .. 8h + 7,
  // high nibbles elements 16 + 8h .. 16 + 8h + 7 (quant_blocks.h).
  int lo[2], hi[2];
  LoadI32x2(a + 8 * half, lo);
  LoadI32x2(a + 16 + 8 * half, hi);
  int isum = Dp4a(w0 & 0x0F0F0F0F, lo[0], 0);
  isum = Dp4a((w0 >> 4) & 0x0F0F0F0F, hi[0], isum);
  isum = Dp4a(w1 & 0x0F0F0F0F, lo[1], isum);
  return Dp4a((w1 >> 4) & 0x0F0F0F0F, hi[1], isum);
}

template <GgmlType kType>
struct Block32Unit {
  static_assert(kType == GgmlType::kQ8_0 || kType == GgmlType::kQ4_0 || kType == GgmlType::kQ4_1);
  static constexpr int kGroup = 2;
  static constexpr int kElems = 16;
  static constexpr int kStepsInFlight = 4;
  static constexpr int kBlockBytes = kType == GgmlType::kQ8_0   ? 34
                                     : kType == GgmlType::kQ4_0 ? 18
                                                                : 20;
  struct Weights {
    float d = 0.0f, m = 0.0f;
    int q[4] = {0, 0, 0, 0};
  };
  // Unit u of a row: half u % 2 of block u / 2.
  static SPLITSPEC_HD void Load(const uint8_t* row, int64_t u, Weights* w) {
    const uint8_t* block = row + (u / 2) * kBlockBytes;
    const int half = static_cast<int>(u % 2);
    w->d = HalfToFloat(LoadU16(block));
    if constexpr (kType == GgmlType::kQ8_0) {
      LoadWordsAt2<4>(block + 2 + 16 * half, w->q);
    } else if constexpr (kType == GgmlType::kQ4_0) {
      LoadWordsAt2<2>(block + 2 + 8 * half, w->q);
    } else {
      w->m = HalfToFloat(LoadU16(block + 2));
      for (int k = 0; k < 2; ++k) w->q[k] = LoadI32(block + 4 + 8 * half + 4 * k);
    }
  }
  // x_block: the token's 32 int8 activations of the unit's block.
  static SPLITSPEC_HD void Partial(const Weights& w, const int8_t* x_block, int64_t u, int* isum,
                                   int* imin) {
    const int half = static_cast<int>(u % 2);
    *imin = 0;
    if constexpr (kType == GgmlType::kQ8_0) {
      int a[4];
      LoadI32x4(x_block + 16 * half, a);
      int s = 0;
      for (int k = 0; k < 4; ++k) s = Dp4a(w.q[k], a[k], s);
      *isum = s;
    } else {
      *isum = NibbleDot(w.q[0], w.q[1], x_block, half);
    }
  }
  // The leader's step for block b of token t (x_index = t * cols / 32 + b).
  static SPLITSPEC_HD void Update(const Weights& w, int isum, int /*imin*/, const Q8View& x,
                                  int64_t x_index, float* acc, float* acc_min) {
    if constexpr (kType == GgmlType::kQ4_0) isum -= 8 * static_cast<int>(x.sum[x_index]);
    *acc = Fma(Mul(w.d, x.d[x_index]), static_cast<float>(isum), *acc);
    if constexpr (kType == GgmlType::kQ4_1) *acc_min = Fma(w.m, x.d_sum[x_index], *acc_min);
  }
  static SPLITSPEC_HD float Finish(float acc, float acc_min) {
    return kType == GgmlType::kQ4_1 ? Add(acc, acc_min) : acc;
  }
  static constexpr int kActivationBlock = 32;
};

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block (12 packed
// bytes; UnpackScaleMinK4's bits).
SPLITSPEC_HD void ScaleMinK4(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

template <GgmlType kType>
struct SuperBlockUnit {
  static_assert(kType == GgmlType::kQ4_K || kType == GgmlType::kQ5_K || kType == GgmlType::kQ6_K);
  static constexpr int kGroup = 8;
  static constexpr int kElems = 32;
  static constexpr int kStepsInFlight = 2;
  static constexpr int kBlockBytes = kType == GgmlType::kQ4_K   ? 144
                                     : kType == GgmlType::kQ5_K ? 176
                                                                : 210;
  struct Weights {
    float d = 0.0f, dmin = 0.0f;
    int scale0 = 0, scale1 = 0, min = 0;
    int q[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // 32 quants as bytes (Q6_K: minus 32)
  };
  // Unit u: sub-block u % 8 of super-block u / 8 (byte layouts: kquant_device.cuh).
  // Q4_K / Q5_K super-blocks (144 / 176 bytes) keep a 16-byte aligned row's quants
  // 16-byte aligned: read in 16-byte loads; Q6_K's 210 bytes only 2-byte aligned.
  static SPLITSPEC_HD void Load(const uint8_t* row, int64_t u, Weights* w) {
    const uint8_t* block = row + (u / 8) * kBlockBytes;
    const int sub = static_cast<int>(u % 8);
    if constexpr (kType == GgmlType::kQ6_K) {
      // Sub-block s = 4 * half + k holds elements 128 * half + 32 * k + l.
      const int half = sub / 4;
      const int k = sub % 4;
      int ql[8], qh[8];
      LoadWordsAt2<8>(block + 64 * half + 32 * (k % 2), ql);
      LoadWordsAt2<8>(block + 128 + 32 * half, qh);
      for (int i = 0; i < 8; ++i) {
        const uint32_t low = (static_cast<uint32_t>(ql[i]) >> (4 * (k / 2))) & 0x0F0F0F0Fu;
        const uint32_t high = ((static_cast<uint32_t>(qh[i]) >> (2 * k)) & 0x03030303u) << 4;
        w->q[i] = SubtractBytes32(low | high);
      }
      w->scale0 = static_cast<int8_t>(block[192 + 2 * sub]);
      w->scale1 = static_cast<int8_t>(block[192 + 2 * sub + 1]);
      w->d = HalfToFloat(LoadU16(block + 208));
    } else {
      // Sub-block j: the low (j even) or high nibbles of qs[32 * (j / 2) ...],
      // Q5_K adding bit j of qh[l] as bit 4.
      const uint8_t* qs = block + (kType == GgmlType::kQ5_K ? 48 : 16) + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      int raw[8], qh[8];
      LoadI32x4(qs, raw);
      LoadI32x4(qs + 16, raw + 4);
      if constexpr (kType == GgmlType::kQ5_K) {
        LoadI32x4(block + 16, qh);
        LoadI32x4(block + 32, qh + 4);
      }
      for (int i = 0; i < 8; ++i) {
        uint32_t v = (static_cast<uint32_t>(raw[i]) >> shift) & 0x0F0F0F0Fu;
        if constexpr (kType == GgmlType::kQ5_K) {
          v |= ((static_cast<uint32_t>(qh[i]) >> sub) & 0x01010101u) << 4;
        }
        w->q[i] = static_cast<int>(v);
      }
      ScaleMinK4(block + 4, sub, &w->scale0, &w->min);
      w->d = HalfToFloat(LoadU16(block));
      w->dmin = HalfToFloat(LoadU16(block + 2));
    }
  }
  // x_block: the token's 256 int8 activations of the unit's super-block.
  static SPLITSPEC_HD void Partial(const Weights& w, const int8_t* x_block, int64_t u, int* isum,
                                   int* imin) {
    int a[8];
    LoadI32x4(x_block + 32 * (u % 8), a);
    LoadI32x4(x_block + 32 * (u % 8) + 16, a + 4);
    int dot0 = 0, dot1 = 0;
    for (int k = 0; k < 4; ++k) dot0 = Dp4a(w.q[k], a[k], dot0);
    for (int k = 4; k < 8; ++k) dot1 = Dp4a(w.q[k], a[k], dot1);
    if constexpr (kType == GgmlType::kQ6_K) {
      *isum = w.scale0 * dot0 + w.scale1 * dot1;
      *imin = 0;
    } else {
      int xsum = 0;
      for (int k = 0; k < 8; ++k) xsum = Dp4a(0x01010101, a[k], xsum);
      *isum = w.scale0 * (dot0 + dot1);
      *imin = w.min * xsum;
    }
  }
  static SPLITSPEC_HD void Update(const Weights& w, int isum, int imin, const Q8View& x,
                                  int64_t x_index, float* acc, float* acc_min) {
    const float d_x = x.d[x_index];
    *acc = Fma(static_cast<float>(isum), Mul(w.d, d_x), *acc);
    if constexpr (kType != GgmlType::kQ6_K) {
      *acc_min = Fma(static_cast<float>(imin), Mul(w.dmin, d_x), *acc_min);
    }
  }
  static SPLITSPEC_HD float Finish(float acc, float acc_min) {
    return kType == GgmlType::kQ6_K ? acc : Sub(acc, acc_min);
  }
  static constexpr int kActivationBlock = 256;
};

// Float weights: unit u is elements 4u .. 4u + 3 (fewer in a ragged last unit).
template <GgmlType kType>
struct FloatUnit {
  static_assert(kType == GgmlType::kF32 || kType == GgmlType::kF16 || kType == GgmlType::kBF16);
  static constexpr int kGroup = 1;
  static constexpr int kElems = 4;
  static constexpr int kStepsInFlight = 4;
  struct Weights {
    float w[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  };
  static SPLITSPEC_HD void Load(const uint8_t* row, int64_t u, int64_t cols, Weights* w) {
    for (int e = 0; e < 4; ++e) {
      const int64_t c = 4 * u + e;
      if (c >= cols) break;
      if constexpr (kType == GgmlType::kF32) {
        float v;
#if defined(__CUDA_ARCH__)
        v = reinterpret_cast<const float*>(row)[c];
#else
        std::memcpy(&v, row + 4 * c, sizeof(v));
#endif
        w->w[e] = v;
      } else if constexpr (kType == GgmlType::kF16) {
        w->w[e] = HalfToFloat(LoadU16(row + 2 * c));
      } else {
        w->w[e] = BfloatToFloat(LoadU16(row + 2 * c));
      }
    }
  }
  // x_row: the token's cols floats.
  static SPLITSPEC_HD float Update(const Weights& w, const float* x_row, int64_t u, int64_t cols,
                                   float acc) {
    for (int e = 0; e < 4; ++e) {
      const int64_t c = 4 * u + e;
      if (c >= cols) break;
      acc = Fma(w.w[e], x_row[c], acc);
    }
    return acc;
  }
};

// ---------------------------------------------------------------- shape

SPLITSPEC_HD int64_t UnitsPerRow(int64_t cols, int elems_per_unit) {
  return (cols + elems_per_unit - 1) / elems_per_unit;
}

// Steps of the lane loop: every lane runs all of them (the group exchange needs
// whole warps); a lane whose unit is past the row contributes nothing.
SPLITSPEC_HD int64_t Steps(int64_t units) { return (units + kWarpSize - 1) / kWarpSize; }

// Fused launches (matvec_plan.h): up to kMaxFusedJobs matrices of one type and
// cols share a grid, job j owning the launch's rows [row_end[j - 1], row_end[j]).
inline constexpr int kMaxFusedJobs = 3;

// The launch row of warp `warp` of thread block `block`.
SPLITSPEC_HD int64_t LaunchRow(int64_t block, int warp) { return block * kRowsPerBlock + warp; }

// The job holding launch row `launch_row` and the row inside it; false past the
// last job's rows (a warp of the last block with no row). Written with constant
// indices only: in the kernel, a runtime index into the parameter struct would
// make every thread copy it to local memory.
// REQUIRES: 1 <= count <= kMaxFusedJobs, row_end increasing.
SPLITSPEC_HD bool LocateRow(const int64_t* row_end, int count, int64_t launch_row, int* job,
                            int64_t* row) {
  int found = 0;
  int64_t start = 0;
  int64_t end = row_end[0];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 1; k < kMaxFusedJobs; ++k) {
    if (k < count && launch_row >= end) {
      found = k;
      start = end;
      end = row_end[k];
    }
  }
  if (launch_row >= end) return false;
  *job = found;
  *row = launch_row - start;
  return true;
}

// ---------------------------------------------------------------- CPU emulation
// The 32 lanes of a warp as the xor butterfly leaves lane 0 (step 2 above).
inline float EmulateWarpSum(const float* lanes) {
  float v[kWarpSize], next[kWarpSize];
  for (int l = 0; l < kWarpSize; ++l) v[l] = lanes[l];
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    for (int l = 0; l < kWarpSize; ++l) next[l] = Add(v[l], v[l ^ offset]);
    for (int l = 0; l < kWarpSize; ++l) v[l] = next[l];
  }
  return v[0];
}

// One output of a quantized type, lane by lane as the row's warp runs it.
template <typename Unit>
float EmulateQuantOutput(const uint8_t* row, int64_t cols, const Q8View& x, int64_t token) {
  const int64_t units = UnitsPerRow(cols, Unit::kElems);
  const int64_t x_blocks = cols / Unit::kActivationBlock;
  float acc[kWarpSize], acc_min[kWarpSize];
  for (int l = 0; l < kWarpSize; ++l) acc[l] = acc_min[l] = 0.0f;
  for (int64_t step = 0; step < Steps(units); ++step) {
    for (int leader = 0; leader < kWarpSize; leader += Unit::kGroup) {
      const int64_t u0 = step * kWarpSize + leader;
      if (u0 >= units) break;  // groups are whole: units is a multiple of kGroup
      const int64_t b = u0 / Unit::kGroup;
      const int8_t* x_block = x.qs + token * cols + b * Unit::kActivationBlock;
      int isum = 0, imin = 0;
      typename Unit::Weights leader_w;
      for (int g = 0; g < Unit::kGroup; ++g) {
        typename Unit::Weights w;
        Unit::Load(row, u0 + g, &w);
        int i = 0, m = 0;
        Unit::Partial(w, x_block, u0 + g, &i, &m);
        isum += i;
        imin += m;
        if (g == 0) leader_w = w;
      }
      Unit::Update(leader_w, isum, imin, x, token * x_blocks + b, &acc[leader], &acc_min[leader]);
    }
  }
  return Unit::Finish(EmulateWarpSum(acc), EmulateWarpSum(acc_min));
}

template <GgmlType kType>
float EmulateFloatOutput(const uint8_t* row, int64_t cols, const float* x, int64_t token) {
  using Unit = FloatUnit<kType>;
  const int64_t units = UnitsPerRow(cols, Unit::kElems);
  float acc[kWarpSize];
  for (float& a : acc) a = 0.0f;
  for (int64_t step = 0; step < Steps(units); ++step) {
    for (int l = 0; l < kWarpSize; ++l) {
      const int64_t u = step * kWarpSize + l;
      if (u >= units) break;
      typename Unit::Weights w;
      Unit::Load(row, u, cols, &w);
      acc[l] = Unit::Update(w, x + token * cols, u, cols, acc[l]);
    }
  }
  return EmulateWarpSum(acc);
}

// True for the types the matvec (and EmulateMatVec) handle.
inline bool MatVecSupportsType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// y[t * y_stride + r] for r < rows, t < tokens, as the CUDA kernel computes it.
// w: rows of RowBytes(type, cols). Float types read x [tokens, cols]; quantized
// types read xq (HostQ8Activations below, or a device tile copied back).
// REQUIRES: MatVecSupportsType(type); for quantized types cols a multiple of the
// type's block.
inline void EmulateMatVec(GgmlType type, const void* w, int64_t rows, int64_t cols,
                          const Q8View& xq, const float* x, int64_t tokens, float* y,
                          int64_t y_stride) {
  const size_t row_bytes = RowBytes(type, cols);
  // As the grid runs: warp (r, tile), tile slot j < n holding token t0 + j.
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w) + r * row_bytes;
    for (int64_t t0 = 0; t0 < tokens; t0 += kMaxTokens) {
      const int n = tokens - t0 < kMaxTokens ? static_cast<int>(tokens - t0) : kMaxTokens;
      for (int j = 0; j < n; ++j) {
        const int64_t t = t0 + j;
        float v = 0.0f;
        switch (type) {
          case GgmlType::kQ8_0:
            v = EmulateQuantOutput<Block32Unit<GgmlType::kQ8_0>>(row, cols, xq, t);
            break;
          case GgmlType::kQ4_0:
            v = EmulateQuantOutput<Block32Unit<GgmlType::kQ4_0>>(row, cols, xq, t);
            break;
          case GgmlType::kQ4_1:
            v = EmulateQuantOutput<Block32Unit<GgmlType::kQ4_1>>(row, cols, xq, t);
            break;
          case GgmlType::kQ4_K:
            v = EmulateQuantOutput<SuperBlockUnit<GgmlType::kQ4_K>>(row, cols, xq, t);
            break;
          case GgmlType::kQ5_K:
            v = EmulateQuantOutput<SuperBlockUnit<GgmlType::kQ5_K>>(row, cols, xq, t);
            break;
          case GgmlType::kQ6_K:
            v = EmulateQuantOutput<SuperBlockUnit<GgmlType::kQ6_K>>(row, cols, xq, t);
            break;
          case GgmlType::kF32:
            v = EmulateFloatOutput<GgmlType::kF32>(row, cols, x, t);
            break;
          case GgmlType::kF16:
            v = EmulateFloatOutput<GgmlType::kF16>(row, cols, x, t);
            break;
          default:
            v = EmulateFloatOutput<GgmlType::kBF16>(row, cols, x, t);
            break;
        }
        y[t * y_stride + r] = v;
      }
    }
  }
}

// ---------------------------------------------------------------- host activations
// The device quantizers' host twin (LaunchQuantizeQ8Blocks / ...SuperBlocks, the
// CPU packer's float operations: d = amax / 127, q = rint(x * (127 / amax))), in
// the device layout, so that the emulation runs on the CPU from float inputs.
struct HostQ8Activations {
  std::vector<int8_t> qs;
  std::vector<float> d, d_sum, sum;
  Q8View view() const { return Q8View{qs.data(), d.data(), d_sum.data(), sum.data()}; }
};

// x [tokens, cols] -> out, per `block` (32: half-rounded d, d_sum and sum; 256: float d).
// REQUIRES: block is 32 or 256, cols % block == 0.
inline void QuantizeOnHost(const float* x, int64_t tokens, int64_t cols, int block,
                           HostQ8Activations* out) {
  const int64_t blocks = tokens * (cols / block);
  out->qs.assign(tokens * cols, 0);
  out->d.assign(blocks, 0.0f);
  out->d_sum.assign(blocks, 0.0f);
  out->sum.assign(blocks, 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* v = x + b * block;
    float amax = 0.0f;
    for (int i = 0; i < block; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < block; ++i) {
      const float r = std::fmin(127.0f, std::fmax(-127.0f, std::rint(v[i] * id)));
      out->qs[b * block + i] = static_cast<int8_t>(r);
      sum += static_cast<int>(r);
    }
    if (block == 32) {
      out->d[b] = RoundToHalf(d);
      out->sum[b] = static_cast<float>(sum);
      out->d_sum[b] = RoundToHalf(d * static_cast<float>(sum));
    } else {
      out->d[b] = d;
    }
  }
}

}  // namespace splitspec::kernels::matvec

#endif  // SPLITSPEC_KERNELS_CUDA_MATVEC_TILING_H_
