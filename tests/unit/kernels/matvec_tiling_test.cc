// The CUDA matvec's arithmetic on the CPU (kernels/cuda/matvec_tiling.h): its
// emulation against the CPU scalar reference (MatMulRowsReference), token-count
// invariance of every output bit, and the launch planner (matvec_plan.h). The
// GPU test (tests/gpu/quant_matmul_cuda_test.cc) then checks the kernel equals
// this emulation bit for bit.
//
// Bound vs the reference, per output: |emulated - reference| <= 1e-5 * S, where S =
// sum_c |w_c x_c| (dequantized weights, float activations, in double). The two run
// the same integer block products (or the same float products) from the same
// 8-bit activations and differ only in the order of the float sum across blocks
// (a chain of at most cols / 16 terms vs a per-lane chain plus a 5-level tree):
// each order's rounding error is below n * 2^-24 * S with n < 900 here, so 1e-5 * S
// holds with room, while a wrong block, scale or nibble gives errors of order S / cols
// and more.
#include "kernels/cuda/matvec_tiling.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize_weights.h"
#include "kernels/cuda/matvec_plan.h"

namespace splitspec::kernels::matvec {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                               GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                               GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

std::string TypeName(GgmlType type) { return GetGgmlTypeTraits(type).name; }

bool IsKQuant(GgmlType type) { return GetGgmlTypeTraits(type).block_size == 256; }

int ActivationBlock(GgmlType type) { return GetGgmlTypeTraits(type).block_size; }

struct Shape {
  int64_t rows, cols, tokens;
};

// A few rows of a matrix: the row count never enters a row's arithmetic, cols does.
std::vector<Shape> ShapesFor(GgmlType type) {
  if (IsKQuant(type)) {  // cols a multiple of 256; 5 super-blocks: not a multiple of 128 units
    return {{1, 256, 1}, {3, 1280, 5}, {4, 2048, 16}, {2, 8192, 17}, {2, 4096, 9}, {2, 14336, 3}};
  }
  // SmolLM2-135M (576 <-> 1536), Llama-3.2-1B (2048 <-> 8192), Llama-3-8B (4096 <-> 14336),
  // a ragged 96.
  return {{3, 96, 3},    {5, 576, 16}, {2, 1536, 9}, {3, 2048, 5},
          {2, 8192, 17}, {2, 4096, 9}, {2, 14336, 3}};
}

std::vector<uint8_t> RandomWeights(GgmlType type, const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-2.0f, 0.0f);
  const size_t row_bytes = RowBytes(type, s.cols);
  std::vector<uint8_t> w(row_bytes * s.rows);
  std::vector<float> row(s.cols);
  for (int64_t r = 0; r < s.rows; ++r) {
    const float scale = std::pow(10.0f, log_scale(rng));
    for (float& v : row) v = scale * normal(rng);
    QuantizeRow(type, row.data(), w.data() + r * row_bytes, s.cols);
  }
  return w;
}

// Normal activations with a few outliers; the last token is all zero (amax == 0).
std::vector<float> RandomActivations(const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> outlier(0, 99);
  std::vector<float> x(s.tokens * s.cols);
  for (float& v : x) v = normal(rng) * (outlier(rng) == 0 ? 20.0f : 1.0f);
  if (s.tokens > 1) std::fill(x.end() - s.cols, x.end(), 0.0f);
  return x;
}

// The emulated kernel from float activations (quantized as the device does).
std::vector<float> Emulate(GgmlType type, const std::vector<uint8_t>& w, const float* x,
                           int64_t rows, int64_t cols, int64_t tokens) {
  HostQ8Activations xq;
  if (GetGgmlTypeTraits(type).block_size > 1) {
    QuantizeOnHost(x, tokens, cols, ActivationBlock(type), &xq);
  }
  std::vector<float> y(tokens * rows);
  EmulateMatVec(type, w.data(), rows, cols, xq.view(), x, tokens, y.data(), rows);
  return y;
}

std::vector<float> Reference(GgmlType type, const std::vector<uint8_t>& w,
                             const std::vector<float>& x, const Shape& s) {
  PackedActivations packed;
  PackActivations(type, x.data(), s.tokens, s.cols, &packed);
  std::vector<float> y(s.tokens * s.rows);
  MatMulRowsReference(type, w.data(), s.cols, packed, 0, s.rows, y.data(), s.rows);
  return y;
}

// S[t, r] = sum_c |w_rc x_tc|.
std::vector<double> AbsoluteScale(GgmlType type, const std::vector<uint8_t>& w,
                                  const std::vector<float>& x, const Shape& s) {
  std::vector<float> row(s.cols);
  std::vector<double> scale(s.tokens * s.rows);
  for (int64_t r = 0; r < s.rows; ++r) {
    DequantizeRow(type, w.data() + r * RowBytes(type, s.cols), row.data(), s.cols);
    for (int64_t t = 0; t < s.tokens; ++t) {
      double acc = 0;
      for (int64_t c = 0; c < s.cols; ++c) acc += std::fabs(double{row[c]} * x[t * s.cols + c]);
      scale[t * s.rows + r] = acc;
    }
  }
  return scale;
}

class MatVecEmulationTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatVecEmulationTest, MatchesTheCpuReferenceWithinTheStatedBound) {
  const GgmlType type = GetParam();
  std::mt19937 rng(36);
  for (const Shape& s : ShapesFor(type)) {
    SCOPED_TRACE(TypeName(type) + " rows=" + std::to_string(s.rows) +
                 " cols=" + std::to_string(s.cols) + " tokens=" + std::to_string(s.tokens));
    const std::vector<uint8_t> w = RandomWeights(type, s, rng);
    const std::vector<float> x = RandomActivations(s, rng);
    const std::vector<float> got = Emulate(type, w, x.data(), s.rows, s.cols, s.tokens);
    const std::vector<float> want = Reference(type, w, x, s);
    const std::vector<double> scale = AbsoluteScale(type, w, x, s);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "output " << i;
      const double err = std::fabs(double{got[i]} - want[i]);
      EXPECT_LE(err, 1e-5 * scale[i] + 1e-30)
          << "output " << i << ": " << got[i] << " vs " << want[i] << ", scale " << scale[i];
      if (scale[i] > 0) worst = std::max(worst, err / scale[i]);
    }
    // The all-zero last token gives exactly zero.
    if (s.tokens > 1) {
      for (int64_t r = 0; r < s.rows; ++r) EXPECT_EQ(got[(s.tokens - 1) * s.rows + r], 0.0f);
    }
    std::printf("[ emulated matvec ] %s cols=%lld: worst |emulated - reference| / S = %.3g\n",
                TypeName(type).c_str(), static_cast<long long>(s.cols), worst);
  }
}

// A token's outputs are the same bits alone, in every batch of 2..16 tokens at
// every slot, and in the second tile of a 17..33-token batch, at SmolLM2 / 1B and
// at Llama-3-8B column counts (4096, 14336). With RealShapesEqualTheEmulationBitForBit
// (tests/gpu/quant_matmul_cuda_test.cc: the kernel equals this emulation at these
// cols and every tile width), the kernel's batch invariance.
TEST_P(MatVecEmulationTest, EveryTokenCountGivesTheSameBits) {
  const GgmlType type = GetParam();
  std::mt19937 rng(3636);
  for (const int64_t cols : {IsKQuant(type) ? int64_t{2048} : int64_t{576}, int64_t{4096},
                             int64_t{14336}}) {
    SCOPED_TRACE(TypeName(type) + " cols=" + std::to_string(cols));
    const Shape s{3, cols, 33};
    const std::vector<uint8_t> w = RandomWeights(type, s, rng);
    const std::vector<float> x = RandomActivations(s, rng);
    const std::vector<float> batch = Emulate(type, w, x.data(), s.rows, cols, s.tokens);
    for (int64_t t = 0; t < s.tokens; ++t) {
      const std::vector<float> alone = Emulate(type, w, x.data() + t * cols, s.rows, cols, 1);
      for (int64_t r = 0; r < s.rows; ++r) {
        ASSERT_EQ(std::memcmp(&alone[r], &batch[t * s.rows + r], sizeof(float)), 0)
            << "token " << t << " row " << r;
      }
    }
    for (int64_t n = 2; n <= 16; ++n) {  // verify blocks of n tokens starting at token 3
      const std::vector<float> block = Emulate(type, w, x.data() + 3 * cols, s.rows, cols, n);
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t r = 0; r < s.rows; ++r) {
          ASSERT_EQ(
              std::memcmp(&block[j * s.rows + r], &batch[(3 + j) * s.rows + r], sizeof(float)), 0)
              << "block of " << n << ", slot " << j << ", row " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatVecEmulationTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return TypeName(info.param);
                         });

TEST(MatVecPrimitivesTest, SubtractBytes32IsPerByteMinus32) {
  for (uint32_t b = 0; b < 64; ++b) {
    const uint32_t v = b | ((63 - b) << 8) | (((b * 7) % 64) << 16) | (((b * 13) % 64) << 24);
    const uint32_t got = static_cast<uint32_t>(SubtractBytes32(v));
    for (int i = 0; i < 4; ++i) {
      const int byte = static_cast<int>((v >> (8 * i)) & 0xFF);
      EXPECT_EQ(static_cast<int8_t>(got >> (8 * i)), byte - 32) << "value " << v << " byte " << i;
    }
  }
}

// At both alignments a 2-byte aligned address can have, the words are the bytes there.
TEST(MatVecPrimitivesTest, LoadWordsAt2ReadsTheWordsAtEitherAlignment) {
  alignas(16) uint8_t bytes[80];
  for (int i = 0; i < 80; ++i) bytes[i] = static_cast<uint8_t>(7 * i + 3);
  const auto word_at = [](const uint8_t* p) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(p[b]) << (8 * b);
    return v;
  };
  for (int offset : {0, 2, 4, 6, 34, 36, 46}) {
    int got[8];
    LoadWordsAt2<8>(bytes + offset, got);
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(static_cast<uint32_t>(got[k]), word_at(bytes + offset + 4 * k))
          << "offset " << offset << " word " << k;
    }
  }
  // Words ending at the last byte of a heap buffer (ASan builds would flag a read past it).
  std::vector<uint8_t> heap(bytes, bytes + 10);
  int two[2];
  LoadWordsAt2<2>(heap.data() + 2, two);
  EXPECT_EQ(static_cast<uint32_t>(two[0]), word_at(bytes + 2));
  EXPECT_EQ(static_cast<uint32_t>(two[1]), word_at(bytes + 6));
}

TEST(MatVecPrimitivesTest, Dp4aIsTheSignedByteDotPlusC) {
  const int a = static_cast<int>(0x80FF017Fu);  // bytes 127, 1, -1, -128
  const int b = static_cast<int>(0x7F02FF80u);  // bytes -128, -1, 2, 127
  EXPECT_EQ(Dp4a(a, b, 5), 127 * -128 + 1 * -1 + -1 * 2 + -128 * 127 + 5);
}

// Lane 0 of the butterfly adds pairs 16 apart first: not the sequential sum.
TEST(MatVecPrimitivesTest, WarpSumIsTheButterflyOrder) {
  float lanes[kWarpSize] = {};
  lanes[0] = 1.0f;
  lanes[16] = 1e8f;
  lanes[1] = -1e8f;
  // Butterfly: (1 + 1e8) rounds to 1e8, then + (-1e8) = 0; sequential would give 1.
  EXPECT_EQ(EmulateWarpSum(lanes), 0.0f);
}

// A lane's units are lane, lane + 32, ...: unit 32 lands on lane 0's chain. F32,
// 132 columns (33 units of 4), x = 1: lane 0 = (1e8 + 1) = 1e8 (the float step at
// 1e8 is 8), lane 16 = -1e8, the butterfly gives 0. Had unit 32 had an accumulator
// of its own (the first, 128-thread version of the kernel) the sum would be 1.
TEST(MatVecPrimitivesTest, ALanesChainHoldsEveryThirtySecondUnit) {
  std::vector<float> w(132, 0.0f), x(132, 1.0f);
  w[0] = 1e8f;        // unit 0, lane 0
  w[4 * 32] = 1.0f;   // unit 32, lane 0
  w[4 * 16] = -1e8f;  // unit 16, lane 16
  EXPECT_EQ(EmulateFloatOutput<GgmlType::kF32>(reinterpret_cast<const uint8_t*>(w.data()), 132,
                                               x.data(), 0),
            0.0f);
}

TEST(MatVecTilingTest, TileColumnsIsTheNarrowestCompiledWidth) {
  const std::vector<std::pair<int64_t, int>> want = {
      {0, 1}, {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 8}, {8, 8}, {9, 16}, {16, 16}, {17, 16}, {512, 16}};
  for (const auto& [tokens, cols] : want) EXPECT_EQ(TileColumns(tokens), cols) << tokens;
}

// Warp w of block b computes launch row 4b + w; fused jobs own consecutive row ranges.
TEST(MatVecTilingTest, LocateRowFindsTheJobAndItsRow) {
  const int64_t row_end[kMaxFusedJobs] = {96, 128, 161};
  struct Case {
    int64_t block;
    int warp;
    bool found;
    int job;
    int64_t row;
  };
  for (const Case& c : std::vector<Case>{{0, 0, true, 0, 0},
                                         {23, 3, true, 0, 95},
                                         {24, 0, true, 1, 0},
                                         {31, 3, true, 1, 31},
                                         {32, 0, true, 2, 0},
                                         {40, 0, true, 2, 32},
                                         {40, 1, false, 0, 0},
                                         {41, 0, false, 0, 0}}) {
    int job = -1;
    int64_t row = -1;
    EXPECT_EQ(LocateRow(row_end, 3, LaunchRow(c.block, c.warp), &job, &row), c.found)
        << "block " << c.block << " warp " << c.warp;
    if (c.found) {
      EXPECT_EQ(job, c.job) << "block " << c.block << " warp " << c.warp;
      EXPECT_EQ(row, c.row) << "block " << c.block << " warp " << c.warp;
    }
  }
  // One job: rows past it are no one's, whatever the unused entries hold.
  const int64_t one[kMaxFusedJobs] = {5, 0, 0};
  int job = -1;
  int64_t row = -1;
  EXPECT_TRUE(LocateRow(one, 1, 4, &job, &row));
  EXPECT_EQ(job, 0);
  EXPECT_EQ(row, 4);
  EXPECT_FALSE(LocateRow(one, 1, 5, &job, &row));
}

// ---------------------------------------------------------------- the planner

TEST(MatVecPlanTest, FusesJobsOfOneTypeAndColsInOrder) {
  const auto plan = PlanMatVecLaunches(
      {{GgmlType::kQ4_K, 2048, 2048}, {GgmlType::kQ4_K, 512, 2048}, {GgmlType::kQ6_K, 512, 2048}},
      5);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].type, GgmlType::kQ4_K);
  EXPECT_EQ((*plan)[0].jobs, (std::vector<int>{0, 1}));
  EXPECT_EQ((*plan)[0].rows, 2560);
  EXPECT_EQ((*plan)[0].row_blocks, 640);
  EXPECT_EQ((*plan)[0].token_tiles, 1);
  EXPECT_EQ((*plan)[0].tile_cols, 8);
  EXPECT_EQ((*plan)[1].jobs, (std::vector<int>{2}));
  EXPECT_EQ((*plan)[1].rows, 512);
  EXPECT_EQ((*plan)[1].row_blocks, 128);
}

// Rows not a multiple of a block's 4: the last block is partly empty.
TEST(MatVecPlanTest, RowBlocksCoverEveryRow) {
  for (const auto& [rows, blocks] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 1}, {5, 2}, {161, 41}, {128256, 32064}}) {
    const auto plan = PlanMatVecLaunches({{GgmlType::kQ8_0, rows, 2048}}, 1);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ((*plan)[0].row_blocks, blocks) << rows << " rows";
    EXPECT_EQ((*plan)[0].tile_cols, 1);
  }
}

TEST(MatVecPlanTest, FusesAtMostThreeJobsAndNeverAcrossCols) {
  const MatVecJobShape q4{GgmlType::kQ4_0, 8, 2048};
  const auto plan = PlanMatVecLaunches(
      {q4, q4, q4, q4, {GgmlType::kQ4_0, 8, 1024}, {GgmlType::kQ4_0, 0, 2048}}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[0].jobs, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ((*plan)[1].jobs, (std::vector<int>{3}));  // the empty job 5 is left out
  EXPECT_EQ((*plan)[2].jobs, (std::vector<int>{4}));
}

TEST(MatVecPlanTest, TokensRunInTilesOfSixteen) {
  struct Case {
    int64_t tokens, tiles;
    int tile_cols;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1}, {2, 1, 2}, {5, 1, 8}, {16, 1, 16},
                                         {17, 2, 16}, {512, 32, 16}}) {
    const auto plan = PlanMatVecLaunches({{GgmlType::kQ8_0, 576, 576}}, c.tokens);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->size(), 1u);
    EXPECT_EQ((*plan)[0].token_tiles, c.tiles) << c.tokens << " tokens";
    EXPECT_EQ((*plan)[0].tile_cols, c.tile_cols) << c.tokens << " tokens";
  }
  const auto none = PlanMatVecLaunches({{GgmlType::kQ8_0, 576, 576}}, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(MatVecPlanTest, RejectsWhatNoKernelRuns) {
  const auto bad_cols = PlanMatVecLaunches({{GgmlType::kQ4_K, 4, 576}}, 1);
  EXPECT_EQ(bad_cols.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_cols.status().message().find("cols 576"), std::string::npos) << bad_cols.status();
  const auto bad_type = PlanMatVecLaunches({{GgmlType::kQ8_K, 4, 256}}, 1);
  EXPECT_NE(bad_type.status().message().find("q8_K"), std::string::npos) << bad_type.status();
  EXPECT_FALSE(PlanMatVecLaunches({{GgmlType::kF16, 4, 64}}, -1).ok());
  const auto too_many = PlanMatVecLaunches({{GgmlType::kF16, 4, 64}}, 65536 * 16);
  EXPECT_NE(too_many.status().message().find("tokens exceed"), std::string::npos)
      << too_many.status();
}

}  // namespace
}  // namespace splitspec::kernels::matvec
