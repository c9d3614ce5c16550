// The tensor-core matmul's arithmetic on the CPU (kernels/cuda/mma_tiling.h): its
// emulation, lanes, warps and mma fragments run in loops, equals the matvec's
// emulation (matvec::EmulateMatVec) bit for bit at the real models' shapes (the
// default model's 49,152-row head included) and at every token count 1..67, so a
// token's outputs do not depend on which path the token count picks (batch
// invariance across the path boundary). Also the mma fragment layout, the rule that
// picks the path and the grid. The GPU test (tests/gpu/quant_matmul_cuda_test.cc)
// checks the kernel equals this emulation.
#include "kernels/cuda/mma_tiling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/quantize_weights.h"
#include "kernels/cuda/matvec_tiling.h"

namespace splitspec::kernels::mma {
namespace {

std::string TypeName(GgmlType type) { return GetGgmlTypeTraits(type).name; }

std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-2.0f, 0.0f);
  const size_t row_bytes = RowBytes(type, cols);
  std::vector<uint8_t> w(row_bytes * rows);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::pow(10.0f, log_scale(rng));
    for (float& v : row) v = scale * normal(rng);
    QuantizeRow(type, row.data(), w.data() + r * row_bytes, cols);
  }
  return w;
}

// Normal activations with a few outliers; the last token is all zero (amax == 0).
std::vector<float> RandomActivations(int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> outlier(0, 99);
  std::vector<float> x(tokens * cols);
  for (float& v : x) v = normal(rng) * (outlier(rng) == 0 ? 20.0f : 1.0f);
  if (tokens > 1) std::fill(x.end() - cols, x.end(), 0.0f);
  return x;
}

// Outputs of the two emulations that differ in any bit, described (empty: none).
std::string Differences(const std::vector<float>& got, const std::vector<float>& want,
                        int64_t rows) {
  std::string out;
  size_t count = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
    if (++count <= 5) {
      out += " (token " + std::to_string(i / rows) + " row " + std::to_string(i % rows) + ": " +
             std::to_string(got[i]) + " vs " + std::to_string(want[i]) + ")";
    }
  }
  return count == 0 ? "" : std::to_string(count) + " outputs differ:" + out;
}

class MmaEmulationTest : public ::testing::TestWithParam<GgmlType> {};

// SmolLM2-135M (576 <-> 1536), Llama-3.2-1B (2048 <-> 8192), Llama-3-8B (4096 <->
// 14336), and 32 / 96 / 256 columns (fewer blocks than the 16 chains); 37 and 33 rows
// (a ragged last row tile), 67 tokens (a ragged last token tile).
TEST_P(MmaEmulationTest, EqualsTheMatVecBitForBitAtRealShapes) {
  const GgmlType type = GetParam();
  std::mt19937 rng(3636);
  for (const int64_t cols : {32, 96, 256, 576, 1280, 1536, 2048, 4096, 8192, 14336}) {
    if (cols % GetGgmlTypeTraits(type).block_size != 0) continue;
    const int64_t rows = cols > 4096 ? 33 : 37;
    const int64_t tokens = cols > 4096 ? 19 : 67;
    SCOPED_TRACE(TypeName(type) + " cols=" + std::to_string(cols));
    const std::vector<uint8_t> w = RandomWeights(type, rows, cols, rng);
    const std::vector<float> x = RandomActivations(tokens, cols, rng);
    matvec::HostQ8Activations xq;
    matvec::QuantizeOnHost(x.data(), tokens, cols, GetGgmlTypeTraits(type).block_size, &xq);
    std::vector<float> matvec(tokens * rows), tensor(tokens * rows);
    matvec::EmulateMatVec(type, w.data(), rows, cols, xq.view(), x.data(), tokens, matvec.data(),
                          rows);
    EmulateMmaMatMul(type, w.data(), rows, cols, xq.view(), tokens, tensor.data(), rows);
    EXPECT_EQ(Differences(tensor, matvec, rows), "");
  }
}

// A prefill of n tokens, n = 1..67, gives each token the bits of the 67-token batch
// (the matvec's bits, which the matvec gives every token count: matvec_tiling_test).
TEST_P(MmaEmulationTest, EveryTokenCountGivesTheMatVecsBits) {
  const GgmlType type = GetParam();
  std::mt19937 rng(36);
  const int block = GetGgmlTypeTraits(type).block_size;
  const int64_t rows = 37, cols = block == 256 ? 1280 : 576, tokens = 67;
  const std::vector<uint8_t> w = RandomWeights(type, rows, cols, rng);
  const std::vector<float> x = RandomActivations(tokens, cols, rng);
  matvec::HostQ8Activations xq;
  matvec::QuantizeOnHost(x.data(), tokens, cols, block, &xq);
  std::vector<float> batch(tokens * rows);
  matvec::EmulateMatVec(type, w.data(), rows, cols, xq.view(), x.data(), tokens, batch.data(),
                        rows);
  for (int64_t n = 1; n <= tokens; ++n) {
    std::vector<float> got(n * rows);
    EmulateMmaMatMul(type, w.data(), rows, cols, xq.view(), n, got.data(), rows);
    const std::vector<float> want(batch.begin(), batch.begin() + n * rows);
    ASSERT_EQ(Differences(got, want, rows), "") << n << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, MmaEmulationTest,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return TypeName(info.param);
                         });

// The default model's tied head (SmolLM2-135M: token_embd, 49,152 x 576 Q8_0) over 20
// tokens (a ragged second tile): every output the matvec's bits.
TEST(MmaEmulationHeadTest, TheDefaultModelsHeadEqualsTheMatVecBitForBit) {
  std::mt19937 rng(49152);
  const int64_t rows = 49152, cols = 576, tokens = 20;
  const std::vector<uint8_t> w = RandomWeights(GgmlType::kQ8_0, rows, cols, rng);
  const std::vector<float> x = RandomActivations(tokens, cols, rng);
  matvec::HostQ8Activations xq;
  matvec::QuantizeOnHost(x.data(), tokens, cols, 32, &xq);
  std::vector<float> matvec(tokens * rows), tensor(tokens * rows);
  matvec::EmulateMatVec(GgmlType::kQ8_0, w.data(), rows, cols, xq.view(), x.data(), tokens,
                        matvec.data(), rows);
  EmulateMmaMatMul(GgmlType::kQ8_0, w.data(), rows, cols, xq.view(), tokens, tensor.data(), rows);
  EXPECT_EQ(Differences(tensor, matvec, rows), "");
}

// Every element of A (16 x 32), B (32 x 8) and C (16 x 8) is in exactly one lane's
// register, and EmulateMma of fragments packed by that layout is the matrix product.
TEST(MmaFragmentTest, TheLayoutCoversEachElementOnceAndMultiplies) {
  int a_seen[16][32] = {}, b_seen[32][8] = {}, c_seen[16][8] = {};
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int i = 0; i < 4; ++i) ++a_seen[ARow(lane, reg)][AK(lane, reg) + i];
      ++c_seen[CRow(lane, reg)][CCol(lane, reg)];
    }
    for (int reg = 0; reg < 2; ++reg) {
      for (int i = 0; i < 4; ++i) ++b_seen[BK(lane, reg) + i][BCol(lane)];
    }
  }
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < 32; ++k) ASSERT_EQ(a_seen[r][k], 1) << "A " << r << "," << k;
  }
  for (int k = 0; k < 32; ++k) {
    for (int n = 0; n < 8; ++n) ASSERT_EQ(b_seen[k][n], 1) << "B " << k << "," << n;
  }
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 8; ++n) ASSERT_EQ(c_seen[r][n], 1) << "C " << r << "," << n;
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(-128, 127);
  int8_t am[16][32], bm[32][8];
  for (auto& row : am) {
    for (int8_t& v : row) v = static_cast<int8_t>(byte(rng));
  }
  for (auto& row : bm) {
    for (int8_t& v : row) v = static_cast<int8_t>(byte(rng));
  }
  int a[kWarpSize][4], b[kWarpSize][2], c[kWarpSize][4];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      uint32_t v = 0;
      for (int i = 0; i < 4; ++i) {
        v |= static_cast<uint32_t>(static_cast<uint8_t>(am[ARow(lane, reg)][AK(lane, reg) + i]))
             << (8 * i);
      }
      a[lane][reg] = static_cast<int>(v);
    }
    for (int reg = 0; reg < 2; ++reg) {
      uint32_t v = 0;
      for (int i = 0; i < 4; ++i) {
        v |= static_cast<uint32_t>(static_cast<uint8_t>(bm[BK(lane, reg) + i][BCol(lane)]))
             << (8 * i);
      }
      b[lane][reg] = static_cast<int>(v);
    }
  }
  EmulateMma(a, b, c);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int e = 0; e < 4; ++e) {
      int want = 0;
      for (int k = 0; k < 32; ++k) want += am[CRow(lane, e)][k] * bm[k][CCol(lane, e)];
      EXPECT_EQ(c[lane][e], want) << "lane " << lane << " register " << e;
    }
  }
}

// A Q4_0 / Q4_1 byte holds element i (low nibble) and 16 + i (high): lane q's A
// registers get elements 4q..4q+3 and 16 + 4q.., Q8_0's the bytes there.
TEST(MmaFragmentTest, RowQuantsAreTheBlocksElementsAtTheLanesK) {
  alignas(16) uint8_t block[40];
  for (int i = 0; i < 40; ++i) block[i] = static_cast<uint8_t>(11 * i + 5);
  const auto byte_of = [](int v, int i) {
    return static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * i));
  };
  for (int q = 0; q < 4; ++q) {
    int lo = 0, hi = 0;
    LoadRowQuants<GgmlType::kQ8_0>(block, q, &lo, &hi);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(byte_of(lo, i), block[2 + 4 * q + i]);
      EXPECT_EQ(byte_of(hi, i), block[2 + 16 + 4 * q + i]);
    }
    LoadRowQuants<GgmlType::kQ4_0>(block, q, &lo, &hi);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(byte_of(lo, i), block[2 + 4 * q + i] & 0x0F);
      EXPECT_EQ(byte_of(hi, i), block[2 + 4 * q + i] >> 4);
    }
    LoadRowQuants<GgmlType::kQ4_1>(block, q, &lo, &hi);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(byte_of(lo, i), block[4 + 4 * q + i] & 0x0F);
      EXPECT_EQ(byte_of(hi, i), block[4 + 4 * q + i] >> 4);
    }
  }
}

TEST(MmaRuleTest, TensorCoresTakeQuantizedTypesBeyondSixteenTokens) {
  for (const GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                              GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    EXPECT_FALSE(UseTensorCores(type, 1)) << TypeName(type);
    EXPECT_FALSE(UseTensorCores(type, 16)) << TypeName(type);
    EXPECT_TRUE(UseTensorCores(type, 17)) << TypeName(type);
    EXPECT_TRUE(UseTensorCores(type, 512)) << TypeName(type);
  }
  for (const GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_K}) {
    EXPECT_FALSE(UseTensorCores(type, 512)) << TypeName(type);
  }
}

TEST(MmaGridTest, TilesCoverRowsAndTokens) {
  struct Case {
    int64_t rows, tokens, row_tiles, token_tiles;
  };
  for (const Case& c : std::vector<Case>{{49152, 512, 1536, 32},  // SmolLM2's head, prefill 512
                                         {576, 17, 18, 2},
                                         {1536, 67, 48, 5},
                                         {37, 1, 2, 1},
                                         {128256, 512, 4008, 32}}) {
    MmaGrid grid;
    ASSERT_TRUE(PlanMmaGrid(GgmlType::kQ4_1, c.rows, 576, c.tokens, &grid).ok());
    EXPECT_EQ(grid.row_tiles, c.row_tiles) << c.rows << " rows";
    EXPECT_EQ(grid.token_tiles, c.token_tiles) << c.tokens << " tokens";
  }
}

TEST(MmaGridTest, RejectsWhatTheKernelCannotRun) {
  MmaGrid grid;
  const absl::Status type = PlanMmaGrid(GgmlType::kF16, 32, 256, 32, &grid);
  EXPECT_NE(type.message().find("f16"), std::string::npos) << type;
  const absl::Status cols = PlanMmaGrid(GgmlType::kQ8_0, 32, 48, 32, &grid);
  EXPECT_NE(cols.message().find("cols 48"), std::string::npos) << cols;
  const absl::Status k_cols = PlanMmaGrid(GgmlType::kQ4_K, 32, 576, 32, &grid);
  EXPECT_NE(k_cols.message().find("cols 576 not a positive multiple of 256"), std::string::npos)
      << k_cols;
  const absl::Status rows = PlanMmaGrid(GgmlType::kQ8_0, 65536 * 32, 64, 32, &grid);
  EXPECT_NE(rows.message().find("rows exceed"), std::string::npos) << rows;
  EXPECT_FALSE(PlanMmaGrid(GgmlType::kQ8_0, 32, 64, -1, &grid).ok());
}

}  // namespace
}  // namespace splitspec::kernels::mma
