// Q4_1 on interleaved rows (kernels/cpu/matmul.h, "Interleaved rows" and "Q4_1 order"):
// every group kernel and MatMulRowsInterleaved agree bitwise with the scalar reference on
// raw rows, at ragged row counts (partial groups) and token counts (partial tiles), on
// fresh random data; a token's outputs do not depend on the batch; nothing outside the
// asked rows is written.
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

struct GroupPath {
  std::string name;
  internal::Q4_1GroupFn fn;
};

// The group kernels this CPU can run, the scalar one included.
std::vector<GroupPath> GroupPaths() {
  __builtin_cpu_init();
  std::vector<GroupPath> paths = {{"scalar", internal::Q4_1GroupScalar}};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    paths.push_back({"avx2", internal::Q4_1GroupAvx2});
  }
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) paths.push_back({"avx512", internal::Q4_1GroupAvx512});
  if (avx512 && __builtin_cpu_supports("avx512vnni")) {
    paths.push_back({"avx512-vnni", internal::Q4_1GroupAvx512Vnni});
  }
  return paths;
}

// Random Q4_1 rows with per-row scales from 0.1 to 3 (so that d and m vary).
std::vector<uint8_t> RandomQ4_1(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.1f, 3.0f);
  const size_t row_bytes = RowBytes(kQ4_1, cols);
  std::vector<uint8_t> bytes(row_bytes * rows);
  std::vector<float> values(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale(rng);
    const float shift = normal(rng);  // Q4_1's minimum matters
    for (float& v : values) v = s * normal(rng) + shift;
    QuantizeRow(kQ4_1, values.data(), bytes.data() + r * row_bytes, cols);
  }
  return bytes;
}

PackedActivations RandomPacked(int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * cols);
  for (float& v : x) v = normal(rng);
  for (int64_t t = 0; t < tokens; ++t) x[t * cols + (t * 7919) % cols] *= 20.0f;  // outliers
  PackedActivations packed;
  PackActivations(kQ4_1, x.data(), tokens, cols, &packed);
  return packed;
}

std::vector<uint8_t> Interleaved(const std::vector<uint8_t>& raw, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(InterleavedBytes(kQ4_1, rows, cols));
  InterleaveRows(kQ4_1, raw.data(), rows, cols, out.data());
  return out;
}

TEST(InterleavedQ4_1Test, LayoutHoldsTheRowsQuantsScalesAndZeroPadding) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 19, cols = 64;  // two blocks; the second group has 3 rows
  const std::vector<uint8_t> raw = RandomQ4_1(rows, cols, rng);
  const std::vector<uint8_t> wi = Interleaved(raw, rows, cols);
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

// Each group kernel, on every group of a 37-row matrix (the last has 5 rows), for token
// counts around the tile sizes (6 on AVX2, 10 on AVX-512): bitwise the reference's
// outputs, and the rows after rows_valid untouched.
TEST(InterleavedQ4_1Test, GroupKernelsMatchTheReferenceBitwise) {
  std::mt19937 rng(std::random_device{}());
  for (int64_t cols : {32, 96, 544, 576, 1536}) {
    const int64_t rows = 37, nb = cols / 32;
    const std::vector<uint8_t> raw = RandomQ4_1(rows, cols, rng);
    const std::vector<uint8_t> wi = Interleaved(raw, rows, cols);
    for (int64_t tokens : {1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 21}) {
      const PackedActivations x = RandomPacked(tokens, cols, rng);
      std::vector<float> want(tokens * rows);
      MatMulRowsReference(kQ4_1, raw.data(), cols, x, 0, rows, want.data(), rows);
      for (const GroupPath& path : GroupPaths()) {
        std::vector<float> got(tokens * rows, -12345.0f);
        for (int64_t r0 = 0; r0 < rows; r0 += 16) {
          const int valid = static_cast<int>(std::min<int64_t>(16, rows - r0));
          path.fn(wi.data() + (r0 / 16) * nb * internal::kQ4_1GroupBlockBytes, nb, x, valid,
                  got.data() + r0, rows);
        }
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i], want[i])
              << path.name << " cols=" << cols << " tokens=" << tokens << " output=" << i;
        }
      }
    }
  }
}

// MatMulRowsInterleaved over whole groups and a range ending inside one, with a wider
// output stride: the reference's bits, nothing written outside [row_begin, row_end).
TEST(InterleavedQ4_1Test, MatMulRowsInterleavedWritesItsRangeWithTheReferenceBits) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 53, cols = 576, stride = 60;
  const std::vector<uint8_t> raw = RandomQ4_1(rows, cols, rng);
  const std::vector<uint8_t> wi = Interleaved(raw, rows, cols);
  for (int64_t tokens : {1, 4, 9, 12}) {
    const PackedActivations x = RandomPacked(tokens, cols, rng);
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 53}, {16, 48}, {32, 41}, {48, 53}}) {
      std::vector<float> want(tokens * stride, -12345.0f), got(tokens * stride, -12345.0f);
      MatMulRowsReference(kQ4_1, raw.data(), cols, x, begin, end, want.data(), stride);
      MatMulRowsInterleaved(kQ4_1, wi.data(), cols, x, begin, end, got.data(), stride);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "rows [" << begin << ", " << end << ") tokens=" << tokens
                                   << " output=" << i;
      }
    }
  }
}

// A token's outputs are the same bits alone and inside batches of any size (tiles split
// differently), on the dispatched path.
TEST(InterleavedQ4_1Test, OutputsAreBitwiseIndependentOfTheBatch) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 48, cols = 1536, tokens = 23;
  const std::vector<uint8_t> raw = RandomQ4_1(rows, cols, rng);
  const std::vector<uint8_t> wi = Interleaved(raw, rows, cols);
  const PackedActivations batch = RandomPacked(tokens, cols, rng);
  std::vector<float> together(tokens * rows);
  MatMulRowsInterleaved(kQ4_1, wi.data(), cols, batch, 0, rows, together.data(), rows);
  const int64_t token_bytes = batch.data.size() / tokens;
  for (int64_t t = 0; t < tokens; ++t) {
    PackedActivations one = batch;
    one.tokens = 1;
    one.data.assign(batch.data.begin() + t * token_bytes,
                    batch.data.begin() + (t + 1) * token_bytes);
    std::vector<float> alone(rows);
    MatMulRowsInterleaved(kQ4_1, wi.data(), cols, one, 0, rows, alone.data(), rows);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_EQ(alone[r], together[t * rows + r]) << "token " << t << " row " << r;
    }
  }
}

// Only Q4_1 has the layout (the other types run on their file rows).
TEST(InterleavedQ4_1Test, OnlyQ4_1HasTheLayout) {
  EXPECT_TRUE(HasInterleavedLayout(GgmlType::kQ4_1));
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
                        GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_FALSE(HasInterleavedLayout(type)) << GetGgmlTypeTraits(type).name;
  }
}

}  // namespace
}  // namespace splitspec::kernels
