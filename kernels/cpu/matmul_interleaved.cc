// Interleaved Q4_1 rows (matmul.h, "Interleaved rows"): the copy, the scalar group
// kernel, the on-the-fly route for raw rows, and MatMulRowsInterleaved's dispatch.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels {
namespace internal {

constexpr int kGroupRows = 16;

// Rows [0, count) of raw Q4_1 rows (nb blocks each) -> one interleaved group (count < 16:
// zero rows after them).
static void InterleaveGroupQ4_1(const BlockQ4_1* const* rows, int count, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* block = out + b * kQ4_1GroupBlockBytes;
    uint16_t d[kGroupRows] = {};
    uint16_t m[kGroupRows] = {};
    for (int i = 0; i < kGroupRows; ++i) {
      if (i >= count) {
        for (int c = 0; c < 4; ++c) std::memset(block + 64 * c + 4 * i, 0, 4);
        continue;
      }
      const BlockQ4_1& w = rows[i][b];
      for (int c = 0; c < 4; ++c) std::memcpy(block + 64 * c + 4 * i, w.qs + 4 * c, 4);
      d[i] = w.d;
      m[i] = w.m;
    }
    std::memcpy(block + 256, d, sizeof(d));
    std::memcpy(block + 288, m, sizeof(m));
  }
}

void Q4_1GroupScalar(const uint8_t* group, int64_t nb, const PackedActivations& x, int rows_valid,
                     float* y, int64_t y_stride) {
  const int64_t token_bytes = PackedTokenBytes(GgmlType::kQ4_1, x.cols);
  for (int64_t t = 0; t < x.tokens; ++t) {
    const Blocks32View xv = ViewBlocks32(x.data.data() + t * token_bytes, x.cols);
    for (int i = 0; i < rows_valid; ++i) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* block = group + b * kQ4_1GroupBlockBytes;
        const int8_t* xq = xv.qs + 32 * b;
        int32_t isum = 0;
        for (int c = 0; c < 4; ++c) {
          for (int e = 0; e < 4; ++e) {
            const uint8_t q = block[64 * c + 4 * i + e];
            isum += (q & 0xF) * xq[4 * c + e] + (q >> 4) * xq[16 + 4 * c + e];
          }
        }
        uint16_t d, m;
        std::memcpy(&d, block + 256 + 2 * i, 2);
        std::memcpy(&m, block + 288 + 2 * i, 2);
        acc = std::fma(static_cast<float>(isum), Fp16ToFloat(d) * xv.d[b], acc);
        acc = std::fma(Fp16ToFloat(m), xv.d_sum[b], acc);
      }
      y[t * y_stride + i] = acc;
    }
  }
}

void Q4_1RowsByGroups(Q4_1GroupFn group_fn, const void* w, int64_t cols,
                      const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                      int64_t y_stride) {
  const int64_t nb = cols / 32;
  thread_local std::vector<uint8_t> scratch;
  const size_t group_bytes = static_cast<size_t>(nb) * kQ4_1GroupBlockBytes;
  if (scratch.size() < group_bytes) scratch.resize(group_bytes);
  const auto* blocks = static_cast<const BlockQ4_1*>(w);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
    const int count = static_cast<int>(row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows);
    const BlockQ4_1* rows[kGroupRows];
    for (int i = 0; i < count; ++i) rows[i] = blocks + (r0 + i) * nb;
    InterleaveGroupQ4_1(rows, count, nb, scratch.data());
    group_fn(scratch.data(), nb, x, count, y + r0, y_stride);
  }
}

}  // namespace internal

namespace {

// Chosen once per process, on the same features as MatMulRows' path.
internal::Q4_1GroupFn ChooseQ4_1GroupFn() {
  const CpuFeatureSet& f = CpuFeatures();
  if (f.avx512_vnni) return internal::Q4_1GroupAvx512Vnni;
  if (f.avx512) return internal::Q4_1GroupAvx512;
  if (f.avx2) return internal::Q4_1GroupAvx2;
  return internal::Q4_1GroupScalar;
}

}  // namespace

bool HasInterleavedLayout(GgmlType weight_type) { return weight_type == GgmlType::kQ4_1; }

size_t InterleavedBytes(GgmlType weight_type, int64_t rows, int64_t cols) {
  if (!HasInterleavedLayout(weight_type)) std::abort();  // programmer error
  const int64_t groups = (rows + internal::kGroupRows - 1) / internal::kGroupRows;
  return static_cast<size_t>(groups) * (cols / 32) * internal::kQ4_1GroupBlockBytes;
}

void InterleaveRows(GgmlType weight_type, const void* w, int64_t rows, int64_t cols,
                    uint8_t* out) {
  if (!HasInterleavedLayout(weight_type)) std::abort();  // programmer error
  const int64_t nb = cols / 32;
  const auto* blocks = static_cast<const BlockQ4_1*>(w);
  for (int64_t r0 = 0; r0 < rows; r0 += internal::kGroupRows) {
    const int count = static_cast<int>(rows - r0 < internal::kGroupRows ? rows - r0
                                                                         : internal::kGroupRows);
    const BlockQ4_1* group_rows[internal::kGroupRows];
    for (int i = 0; i < count; ++i) group_rows[i] = blocks + (r0 + i) * nb;
    internal::InterleaveGroupQ4_1(group_rows, count, nb,
                        out + (r0 / internal::kGroupRows) * nb * internal::kQ4_1GroupBlockBytes);
  }
}

void MatMulRowsInterleaved(GgmlType weight_type, const uint8_t* wi, int64_t cols,
                           const PackedActivations& x, int64_t row_begin, int64_t row_end,
                           float* y, int64_t y_stride) {
  static const internal::Q4_1GroupFn group_fn = ChooseQ4_1GroupFn();
  // Programmer errors: another type, activations packed for another matrix, a range
  // that does not start a group.
  if (!HasInterleavedLayout(weight_type) || x.weight_type != weight_type || x.cols != cols ||
      row_begin % internal::kGroupRows != 0) {
    std::abort();
  }
  const int64_t nb = cols / 32;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += internal::kGroupRows) {
    const int count = static_cast<int>(row_end - r0 < internal::kGroupRows ? row_end - r0
                                                                           : internal::kGroupRows);
    group_fn(wi + (r0 / internal::kGroupRows) * nb * internal::kQ4_1GroupBlockBytes, nb, x, count,
             y + r0, y_stride);
  }
}

}  // namespace splitspec::kernels
