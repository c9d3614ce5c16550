// Q4_1 and Q8_0 on interleaved rows (kernels/cpu/matmul.h, "Interleaved rows", "Q4_1
// order", "Q8_0 order"): every group kernel and MatMulRowsInterleaved agree bitwise with
// the scalar reference on raw rows, at ragged row counts (partial groups) and token counts
// (partial tiles), on fresh random data; a token's outputs do not depend on the batch;
// nothing outside the asked rows is written.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_tiles.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_weights.h"

namespace splitspec::kernels {
namespace {

constexpr GgmlType kQ4_1 = GgmlType::kQ4_1;
constexpr GgmlType kQ8_0 = GgmlType::kQ8_0;
constexpr GgmlType kTypes[] = {kQ4_1, kQ8_0};

struct GroupPath {
  std::string name;
  internal::GroupFn fn;
};

// The group kernels of `type` this CPU can run, the scalar one included.
std::vector<GroupPath> GroupPaths(GgmlType type) {
  __builtin_cpu_init();
  const bool q4_1 = type == kQ4_1;
  std::vector<GroupPath> paths = {
      {"scalar", q4_1 ? internal::Q4_1GroupScalar : internal::Q8_0GroupScalar}};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    paths.push_back({"avx2", q4_1 ? internal::Q4_1GroupAvx2 : internal::Q8_0GroupAvx2});
  }
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) {
    paths.push_back({"avx512", q4_1 ? internal::Q4_1GroupAvx512 : internal::Q8_0GroupAvx512});
  }
  if (avx512 && __builtin_cpu_supports("avx512vnni")) {
    paths.push_back(
        {"avx512-vnni", q4_1 ? internal::Q4_1GroupAvx512Vnni : internal::Q8_0GroupAvx512Vnni});
  }
  if (CpuFeatures().amx_int8) {
    paths.push_back({"amx", q4_1 ? internal::Q4_1GroupAmx : internal::Q8_0GroupAmx});
  }
  return paths;
}

std::string Name(GgmlType type) { return GetGgmlTypeTraits(type).name; }

// Random rows with per-row scales from 0.1 to 3 (so that d and m vary) and a per-row
// shift (Q4_1's minimum matters); Q8_0 rows also get a -128 quant now and then, which
// the file format allows even though the quantizer never writes one.
std::vector<uint8_t> RandomRows(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.1f, 3.0f);
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> bytes(row_bytes * rows);
  std::vector<float> values(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale(rng);
    const float shift = normal(rng);
    for (float& v : values) v = s * normal(rng) + shift;
    uint8_t* row = bytes.data() + r * row_bytes;
    QuantizeRow(type, values.data(), row, cols);
    if (type == kQ8_0 && r % 3 == 0) {
      reinterpret_cast<BlockQ8_0*>(row)[r % (cols / 32)].qs[r % 32] = -128;
    }
  }
  return bytes;
}

PackedActivations RandomPacked(GgmlType type, int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * cols);
  for (float& v : x) v = normal(rng);
  for (int64_t t = 0; t < tokens; ++t) x[t * cols + (t * 7919) % cols] *= 20.0f;  // outliers
  PackedActivations packed;
  PackActivations(type, x.data(), tokens, cols, &packed);
  return packed;
}

std::vector<uint8_t> Interleaved(GgmlType type, const std::vector<uint8_t>& raw, int64_t rows,
                                 int64_t cols) {
  std::vector<uint8_t> out(InterleavedBytes(type, rows, cols));
  InterleaveRows(type, raw.data(), rows, cols, out.data());
  return out;
}

TEST(InterleavedRowsTest, Q4_1LayoutHoldsTheRowsQuantsScalesAndZeroPadding) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 19, cols = 64;  // two blocks; the second group has 3 rows
  const std::vector<uint8_t> raw = RandomRows(kQ4_1, rows, cols, rng);
  const std::vector<uint8_t> wi = Interleaved(kQ4_1, raw, rows, cols);
  ASSERT_EQ(wi.size(), 2u * 2 * internal::kQ4_1GroupBlockBytes);
  const auto* blocks = reinterpret_cast<const BlockQ4_1*>(raw.data());
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t b = 0; b < 2; ++b) {
      const uint8_t* block = wi.data() + (g * 2 + b) * internal::kQ4_1GroupBlockBytes;
      for (int i = 0; i < 16; ++i) {
        const int64_t r = 16 * g + i;
        uint16_t d, m;
        std::memcpy(&d, block + 256 + 2 * i, 2);
        std::memcpy(&m, block + 288 + 2 * i, 2);
        for (int c = 0; c < 4; ++c) {
          for (int e = 0; e < 4; ++e) {
            const uint8_t want = r < rows ? blocks[r * 2 + b].qs[4 * c + e] : 0;
            ASSERT_EQ(block[64 * c + 4 * i + e], want) << "g=" << g << " b=" << b << " i=" << i;
          }
        }
        EXPECT_EQ(d, r < rows ? blocks[r * 2 + b].d : 0) << "row " << r;
        EXPECT_EQ(m, r < rows ? blocks[r * 2 + b].m : 0) << "row " << r;
      }
    }
  }
}

TEST(InterleavedRowsTest, Q8_0LayoutHoldsBiasedQuantsScalesAndZeroPadding) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 21, cols = 32;  // one block; the second group has 5 rows
  const std::vector<uint8_t> raw = RandomRows(kQ8_0, rows, cols, rng);
  const std::vector<uint8_t> wi = Interleaved(kQ8_0, raw, rows, cols);
  ASSERT_EQ(wi.size(), 2u * internal::kQ8_0GroupBlockBytes);
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(raw.data());
  for (int64_t r = 0; r < 32; ++r) {
    const uint8_t* group = wi.data() + (r / 16) * internal::kQ8_0GroupBlockBytes;
    const uint8_t* block = internal::GroupQuants(kQ8_0, group, 0);
    const int i = static_cast<int>(r % 16);
    for (int e = 0; e < 32; ++e) {
      const int want = r < rows ? blocks[r].qs[e] + 128 : 128;
      ASSERT_EQ(block[64 * (e / 4) + 4 * i + e % 4], want) << "row " << r << " element " << e;
    }
    uint16_t d;
    std::memcpy(&d, internal::GroupScales(kQ8_0, group, 0) + 2 * i, 2);
    EXPECT_EQ(d, r < rows ? blocks[r].d : 0) << "row " << r;
  }
}

// Each group kernel, on every group of a 37-row matrix (the last has 5 rows), for token
// counts around the tile sizes (6 on AVX2, 10 on AVX-512, 16 on AMX) and block counts
// odd and even (AMX takes blocks in pairs): bitwise the reference's outputs, and the rows
// after rows_valid untouched. The AMX kernel runs where the CPU and the OS allow it
// (CpuFeatures().amx_int8).
TEST(InterleavedRowsTest, GroupKernelsMatchTheReferenceBitwise) {
  std::mt19937 rng(std::random_device{}());
  for (GgmlType type : kTypes) {
    for (int64_t cols : {32, 96, 544, 576, 1536}) {
      const int64_t rows = 37, nb = cols / 32;
      const std::vector<uint8_t> raw = RandomRows(type, rows, cols, rng);
      const std::vector<uint8_t> wi = Interleaved(type, raw, rows, cols);
      for (int64_t tokens : {1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 16, 17, 21, 33}) {
        const PackedActivations x = RandomPacked(type, tokens, cols, rng);
        std::vector<float> want(tokens * rows);
        MatMulRowsReference(type, raw.data(), cols, x, 0, rows, want.data(), rows);
        for (const GroupPath& path : GroupPaths(type)) {
          std::vector<float> got(tokens * rows, -12345.0f);
          for (int64_t r0 = 0; r0 < rows; r0 += 16) {
            const int valid = static_cast<int>(std::min<int64_t>(16, rows - r0));
            path.fn(wi.data() + (r0 / 16) * nb * internal::GroupBlockBytes(type), nb, x, valid,
                    got.data() + r0, rows);
          }
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i], want[i]) << Name(type) << " " << path.name << " cols=" << cols
                                       << " tokens=" << tokens << " output=" << i;
          }
        }
      }
    }
  }
}

// MatMulRowsInterleaved over whole groups and a range ending inside one, with a wider
// output stride: the reference's bits, nothing written outside [row_begin, row_end).
TEST(InterleavedRowsTest, MatMulRowsInterleavedWritesItsRangeWithTheReferenceBits) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 53, cols = 576, stride = 60;
  for (GgmlType type : kTypes) {
    const std::vector<uint8_t> raw = RandomRows(type, rows, cols, rng);
    const std::vector<uint8_t> wi = Interleaved(type, raw, rows, cols);
    for (int64_t tokens : {1, 4, 9, 12, 17}) {
      const PackedActivations x = RandomPacked(type, tokens, cols, rng);
      for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 53}, {16, 48}, {32, 41}, {48, 53}}) {
        std::vector<float> want(tokens * stride, -12345.0f), got(tokens * stride, -12345.0f);
        MatMulRowsReference(type, raw.data(), cols, x, begin, end, want.data(), stride);
        MatMulRowsInterleaved(type, wi.data(), cols, x, begin, end, got.data(), stride);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << Name(type) << " rows [" << begin << ", " << end
                                     << ") tokens=" << tokens << " output=" << i;
        }
      }
    }
  }
}

// A token's outputs are the same bits alone and inside batches of any size (tiles split
// differently), on the dispatched path.
TEST(InterleavedRowsTest, OutputsAreBitwiseIndependentOfTheBatch) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 48, cols = 1536, tokens = 23;
  for (GgmlType type : kTypes) {
    const std::vector<uint8_t> raw = RandomRows(type, rows, cols, rng);
    const std::vector<uint8_t> wi = Interleaved(type, raw, rows, cols);
    const PackedActivations batch = RandomPacked(type, tokens, cols, rng);
    std::vector<float> together(tokens * rows);
    MatMulRowsInterleaved(type, wi.data(), cols, batch, 0, rows, together.data(), rows);
    const int64_t token_bytes = batch.data.size() / tokens;
    for (int64_t t = 0; t < tokens; ++t) {
      PackedActivations one = batch;
      one.tokens = 1;
      one.data.assign(batch.data.begin() + t * token_bytes,
                      batch.data.begin() + (t + 1) * token_bytes);
      std::vector<float> alone(rows);
      MatMulRowsInterleaved(type, wi.data(), cols, one, 0, rows, alone.data(), rows);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(alone[r], together[t * rows + r]) << Name(type) << " token " << t << " row " << r;
      }
    }
  }
}

// Only Q4_1 and Q8_0 have the layout (the other types run on their file rows).
TEST(InterleavedRowsTest, OnlyQ4_1AndQ8_0HaveTheLayout) {
  EXPECT_TRUE(HasInterleavedLayout(GgmlType::kQ4_1));
  EXPECT_TRUE(HasInterleavedLayout(GgmlType::kQ8_0));
  for (GgmlType type :
       {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_FALSE(HasInterleavedLayout(type)) << GetGgmlTypeTraits(type).name;
  }
}

}  // namespace
}  // namespace splitspec::kernels
