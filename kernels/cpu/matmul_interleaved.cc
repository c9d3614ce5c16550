// Interleaved rows (matmul.h, "Interleaved rows"): the copy, the scalar group kernels,
// the on-the-fly route for raw rows, and MatMulRowsInterleaved's dispatch.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels {
namespace internal {

constexpr int kGroupRows = 16;

// Rows [0, count) (raw Q4_1 or Q8_0 blocks, nb each) -> one interleaved group; rows from
// count to 16 are zero rows (Q8_0's zero is the biased byte 0x80).
template <class Block>
static void InterleaveGroup(const Block* const* rows, int count, int64_t nb, uint8_t* out) {
  constexpr GgmlType kType = sizeof(Block) == sizeof(BlockQ4_1) ? GgmlType::kQ4_1 : GgmlType::kQ8_0;
  constexpr int kChunks = kType == GgmlType::kQ4_1 ? 4 : 8;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* quants = const_cast<uint8_t*>(GroupQuants(kType, out, b));
    uint8_t* scales = const_cast<uint8_t*>(GroupScales(kType, out, b));
    uint16_t d[kGroupRows] = {};
    uint16_t m[kGroupRows] = {};
    for (int i = 0; i < kGroupRows; ++i) {
      for (int c = 0; c < kChunks; ++c) {
        uint8_t* lane = quants + 64 * c + 4 * i;
        if (i >= count) {
          std::memset(lane, kType == GgmlType::kQ4_1 ? 0 : 0x80, 4);
          continue;
        }
        std::memcpy(lane, reinterpret_cast<const uint8_t*>(rows[i][b].qs) + 4 * c, 4);
        if constexpr (kType == GgmlType::kQ8_0) {
          for (int e = 0; e < 4; ++e) lane[e] ^= 0x80;  // int8 -> uint8 with +128
        }
      }
      if (i >= count) continue;
      d[i] = rows[i][b].d;
      if constexpr (kType == GgmlType::kQ4_1) m[i] = rows[i][b].m;
    }
    std::memcpy(scales, d, sizeof(d));
    if constexpr (kType == GgmlType::kQ4_1) std::memcpy(scales + sizeof(d), m, sizeof(m));
  }
}

static void InterleaveRuns(GgmlType type, const void* w, int64_t cols, int64_t row_begin, int count,
                           uint8_t* out) {
  const int64_t nb = cols / 32;
  if (type == GgmlType::kQ4_1) {
    const BlockQ4_1* rows[kGroupRows];
    for (int i = 0; i < count; ++i)
      rows[i] = static_cast<const BlockQ4_1*>(w) + (row_begin + i) * nb;
    InterleaveGroup(rows, count, nb, out);
  } else {
    const BlockQ8_0* rows[kGroupRows];
    for (int i = 0; i < count; ++i)
      rows[i] = static_cast<const BlockQ8_0*>(w) + (row_begin + i) * nb;
    InterleaveGroup(rows, count, nb, out);
  }
}

// Row i's exact integer dot of a group's block (its quants at `quants`) with one
// token's 32 activation quants xq.
template <GgmlType kType>
static int32_t GroupBlockDot(const uint8_t* quants, int i, const int8_t* xq) {
  int32_t isum = 0;
  if constexpr (kType == GgmlType::kQ4_1) {
    for (int c = 0; c < 4; ++c) {
      for (int e = 0; e < 4; ++e) {
        const uint8_t q = quants[64 * c + 4 * i + e];
        isum += (q & 0xF) * xq[4 * c + e] + (q >> 4) * xq[16 + 4 * c + e];
      }
    }
  } else {
    for (int c = 0; c < 8; ++c) {
      for (int e = 0; e < 4; ++e) {
        isum += (static_cast<int>(quants[64 * c + 4 * i + e]) - 128) * xq[4 * c + e];
      }
    }
  }
  return isum;
}

// The scalar group kernel: the Q4_1 / Q8_0 order of matmul.h, one output at a time.
template <GgmlType kType>
static void GroupScalar(const uint8_t* group, int64_t nb, const PackedActivations& x,
                        int rows_valid, float* y, int64_t y_stride) {
  const int64_t token_bytes = PackedTokenBytes(kType, x.cols);
  for (int64_t t = 0; t < x.tokens; ++t) {
    const Blocks32View xv = ViewBlocks32(x.data.data() + t * token_bytes, x.cols);
    for (int i = 0; i < rows_valid; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const int32_t isum = GroupBlockDot<kType>(GroupQuants(kType, group, b), i, xv.qs + 32 * b);
        const uint8_t* scales = GroupScales(kType, group, b);
        uint16_t d;
        std::memcpy(&d, scales + 2 * i, 2);
        acc = std::fma(static_cast<float>(isum), Fp16ToFloat(d) * xv.d[b], acc);
        if constexpr (kType == GgmlType::kQ4_1) {
          uint16_t m;
          std::memcpy(&m, scales + 32 + 2 * i, 2);
          acc = std::fma(Fp16ToFloat(m), xv.d_sum[b], acc);
        }
      }
      y[t * y_stride + i] = acc;
    }
  }
}

void Q4_1GroupScalar(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                     float* y, int64_t y_stride) {
  GroupScalar<GgmlType::kQ4_1>(group, nb, x, rows_valid, y, y_stride);
}

void Q8_0GroupScalar(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                     float* y, int64_t y_stride) {
  GroupScalar<GgmlType::kQ8_0>(group, nb, x, rows_valid, y, y_stride);
}

void RowsByGroups(GgmlType weight_type, GroupFn group_fn, const void* w, int64_t cols,
                  const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                  int64_t y_stride) {
  const int64_t nb = cols / 32;
  thread_local std::vector<uint8_t> scratch;
  const size_t group_bytes = static_cast<size_t>(nb) * GroupBlockBytes(weight_type);
  if (scratch.size() < group_bytes) scratch.resize(group_bytes);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
    const int count = static_cast<int>(row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows);
    InterleaveRuns(weight_type, w, cols, r0, count, scratch.data());
    group_fn(scratch.data(), nb, x, count, y + r0, y_stride);
  }
}

}  // namespace internal

namespace {

// With AMX: a call of at least kAmxMinTokens tokens runs on the tiles, a smaller one on
// the VNNI kernel (bitwise the same outputs, matmul_interleaved_amx.cc); below it the
// tile multiply's fixed cost per block outweighs the vpdpbusd it saves.
template <internal::GroupFn kAmx, internal::GroupFn kVnni>
void AmxOrVnni(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
               float* y, int64_t y_stride) {
  (x.tokens >= InterleavedAmxMinTokens() ? kAmx : kVnni)(group, nb, x, rows_valid, y, y_stride);
}

// Chosen once per process, on the same features as MatMulRows' path.
internal::GroupFn ChooseGroupFn(GgmlType type) {
  const CpuFeatureSet& f = CpuFeatures();
  const bool q4_1 = type == GgmlType::kQ4_1;
  if (f.amx_int8) {
    return q4_1 ? AmxOrVnni<internal::Q4_1GroupAmx, internal::Q4_1GroupAvx512Vnni>
                : AmxOrVnni<internal::Q8_0GroupAmx, internal::Q8_0GroupAvx512Vnni>;
  }
  if (f.avx512_vnni) return q4_1 ? internal::Q4_1GroupAvx512Vnni : internal::Q8_0GroupAvx512Vnni;
  if (f.avx512) return q4_1 ? internal::Q4_1GroupAvx512 : internal::Q8_0GroupAvx512;
  if (f.avx2) return q4_1 ? internal::Q4_1GroupAvx2 : internal::Q8_0GroupAvx2;
  return q4_1 ? internal::Q4_1GroupScalar : internal::Q8_0GroupScalar;
}

}  // namespace

bool InterleavedRunsOnAmx() { return CpuFeatures().amx_int8; }

int InterleavedAmxMinTokens() {
  static const int min_tokens = [] {
    const char* forced = std::getenv("SPLITSPEC_AMX_MIN_TOKENS");
    return forced != nullptr && std::atoi(forced) > 0 ? std::atoi(forced)
                                                      : internal::kAmxMinTokens;
  }();
  return min_tokens;
}

const char* InterleavedAmxNote() {
  static const std::string note =
      InterleavedRunsOnAmx() ? " + amx tiles for calls of >= " +
                                   std::to_string(InterleavedAmxMinTokens()) + " tokens"
                             : "";
  return note.c_str();
}

bool HasInterleavedLayout(GgmlType weight_type) {
  return weight_type == GgmlType::kQ4_1 || weight_type == GgmlType::kQ8_0;
}

size_t InterleavedBytes(GgmlType weight_type, int64_t rows, int64_t cols) {
  if (!HasInterleavedLayout(weight_type)) std::abort();  // programmer error
  const int64_t groups = (rows + internal::kGroupRows - 1) / internal::kGroupRows;
  return static_cast<size_t>(groups) * (cols / 32) * internal::GroupBlockBytes(weight_type);
}

void InterleaveRows(GgmlType weight_type, const void* w, int64_t rows, int64_t cols, uint8_t* out) {
  if (!HasInterleavedLayout(weight_type)) std::abort();  // programmer error
  const int64_t group_bytes = (cols / 32) * internal::GroupBlockBytes(weight_type);
  for (int64_t r0 = 0; r0 < rows; r0 += internal::kGroupRows) {
    const int count =
        static_cast<int>(rows - r0 < internal::kGroupRows ? rows - r0 : internal::kGroupRows);
    internal::InterleaveRuns(weight_type, w, cols, r0, count,
                             out + (r0 / internal::kGroupRows) * group_bytes);
  }
}

void MatMulRowsInterleaved(GgmlType weight_type, const uint8_t* wi, int64_t cols,
                           const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                           int64_t y_stride) {
  static const internal::GroupFn q4_1 = ChooseGroupFn(GgmlType::kQ4_1);
  static const internal::GroupFn q8_0 = ChooseGroupFn(GgmlType::kQ8_0);
  // Programmer errors: another type, activations packed for another matrix, a range
  // that does not start a group.
  if (!HasInterleavedLayout(weight_type) || x.weight_type != weight_type || x.cols != cols ||
      row_begin % internal::kGroupRows != 0) {
    std::abort();
  }
  const internal::GroupFn group_fn = weight_type == GgmlType::kQ4_1 ? q4_1 : q8_0;
  const int64_t group_bytes = (cols / 32) * internal::GroupBlockBytes(weight_type);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += internal::kGroupRows) {
    const int count =
        static_cast<int>(row_end - r0 < internal::kGroupRows ? row_end - r0 : internal::kGroupRows);
    group_fn(wi + (r0 / internal::kGroupRows) * group_bytes, cols / 32, x, count, y + r0, y_stride);
  }
}

}  // namespace splitspec::kernels
