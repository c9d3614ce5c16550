#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"
#include "kernels/cpu/quantize_weights.h"
#include "tests/testing/matmul_bounds.h"

namespace splitspec::kernels {
namespace {

using RowsFn = void (*)(GgmlType, const void*, int64_t, const PackedActivations&, int64_t, int64_t,
                        float*, int64_t);

struct Path {
  std::string name;
  RowsFn fn;
};

// The vector paths this CPU can run (each is tested, whatever MatMulRows dispatches to).
std::vector<Path> FastPaths() {
  __builtin_cpu_init();
  std::vector<Path> paths;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    paths.push_back({"avx2", internal::MatMulRowsAvx2});
  }
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) paths.push_back({"avx512", internal::MatMulRowsAvx512});
  if (avx512 && __builtin_cpu_supports("avx512vnni")) {
    paths.push_back({"avx512-vnni", internal::MatMulRowsAvx512Vnni});
  }
  return paths;
}

constexpr GgmlType kAllTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                  GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                  GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

// Column counts per type: one block, a few blocks (odd counts to hit the vector
// tails), and the default model's 576 and 1536 where the block size allows.
std::vector<int64_t> ColsFor(GgmlType type) {
  switch (GetGgmlTypeTraits(type).block_size) {
    case 1:
      return {1, 13, 32, 100, 576, 1536};
    case 32:
      return {32, 96, 544, 576, 1536};
    default:
      return {256, 768, 1536};
  }
}

std::string Name(GgmlType type) { return GetGgmlTypeTraits(type).name; }

// A random matrix: mostly normal values, with a heavier-tailed column here and there
// so that block scales vary.
struct Matrix {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;  // [rows, cols]
};

Matrix RandomMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.1f, 3.0f);
  Matrix m{type, rows, cols, std::vector<uint8_t>(RowBytes(type, cols) * rows),
           std::vector<float>(rows * cols)};
  std::vector<float> values(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale(rng);
    for (float& v : values) v = s * normal(rng);
    uint8_t* row = m.bytes.data() + r * RowBytes(type, cols);
    QuantizeRow(type, values.data(), row, cols);
    DequantizeRow(type, row, m.dequantized.data() + r * cols, cols);
  }
  return m;
}

std::vector<float> RandomActivations(int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * cols);
  for (float& v : x) v = normal(rng);
  // A few outliers, as real hidden states have.
  for (int64_t t = 0; t < tokens; ++t) x[t * cols + (t * 7919) % cols] *= 20.0f;
  return x;
}

std::vector<float> RunRows(RowsFn fn, const Matrix& m, const PackedActivations& x,
                           int64_t row_begin, int64_t row_end) {
  std::vector<float> y(x.tokens * m.rows, NAN);
  fn(m.type, m.bytes.data(), m.cols, x, row_begin, row_end, y.data(), m.rows);
  return y;
}

// The partial sums' mass of output (r, x) (tests/testing/matmul_bounds.h).
double Mass(const Matrix& m, int64_t r, const float* x) {
  return PartialSumMass(m.type, m.dequantized.data() + r * m.cols, x, m.cols);
}

// Every vector path agrees with the scalar reference of the same integer algorithm:
// the integer block products are exact in both, so the difference is float summation
// order only, bounded by SummationBound over the partial sums' mass. Q4_1 follows one
// summation order on every path (matmul.h, "Q4_1 order"), so there they agree bitwise.
TEST(MatMulTest, FastPathsMatchReferenceAtRaggedSizes) {
  const std::vector<Path> paths = FastPaths();
  if (paths.empty()) GTEST_SKIP() << "no vector path on this CPU";
  std::mt19937 rng(std::random_device{}());
  for (GgmlType type : kAllTypes) {
    for (int64_t cols : ColsFor(type)) {
      const int64_t rows = 37;  // not a multiple of any row blocking
      const Matrix m = RandomMatrix(type, rows, cols, rng);
      for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16}) {
        const std::vector<float> xf = RandomActivations(tokens, cols, rng);
        PackedActivations x;
        PackActivations(type, xf.data(), tokens, cols, &x);
        const std::vector<float> want = RunRows(MatMulRowsReference, m, x, 0, rows);
        for (const Path& path : paths) {
          const std::vector<float> got = RunRows(path.fn, m, x, 0, rows);
          if (type == GgmlType::kQ4_1) {  // one order on every path: bitwise equal
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_EQ(got[i], want[i])
                  << path.name << " Q4_1 cols=" << cols << " tokens=" << tokens << " i=" << i;
            }
            continue;
          }
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const double bound = SummationBound(cols, Mass(m, r, xf.data() + t * cols));
              ASSERT_NEAR(got[t * rows + r], want[t * rows + r], bound)
                  << path.name << " " << Name(type) << " cols=" << cols << " tokens=" << tokens
                  << " t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
}

// Q4_1 in llama.cpp's order (SPLITSPEC_MATMUL_ORDER=llama.cpp, matmul.h) is the same
// integer algorithm summed in another float order: within the summation bound of the
// interleaved reference, on fresh random data at ragged sizes, and not bitwise the same
// everywhere (else the mode would be pointless).
TEST(MatMulTest, Q4_1InLlamaCppOrderMatchesTheReferenceWithinRounding) {
  std::mt19937 rng(std::random_device{}());
  int64_t differing = 0;
  for (int64_t cols : ColsFor(GgmlType::kQ4_1)) {
    const int64_t rows = 37;
    const Matrix m = RandomMatrix(GgmlType::kQ4_1, rows, cols, rng);
    for (int64_t tokens : {1, 3, 10}) {
      const std::vector<float> xf = RandomActivations(tokens, cols, rng);
      PackedActivations x;
      PackActivations(GgmlType::kQ4_1, xf.data(), tokens, cols, &x);
      const std::vector<float> want = RunRows(MatMulRowsReference, m, x, 0, rows);
      const std::vector<float> got = RunRows(
          [](GgmlType, const void* w, int64_t c, const PackedActivations& p, int64_t b, int64_t e,
             float* y, int64_t s) { internal::MatMulRowsQ4_1LlamaCppOrder(w, c, p, b, e, y, s); },
          m, x, 0, rows);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          const double bound = SummationBound(cols, Mass(m, r, xf.data() + t * cols));
          ASSERT_NEAR(got[t * rows + r], want[t * rows + r], bound)
              << "cols=" << cols << " tokens=" << tokens << " t=" << t << " r=" << r;
          differing += got[t * rows + r] != want[t * rows + r];
        }
      }
    }
  }
  EXPECT_GT(differing, 0) << "the two orders gave the same bits everywhere";
}

TEST(MatMulTest, InterleavedOrderIsTheDefault) {
  if (std::getenv("SPLITSPEC_MATMUL_ORDER") != nullptr) GTEST_SKIP() << "order forced by env";
  EXPECT_EQ(ActiveMatMulOrder(), MatMulOrder::kInterleaved);
  EXPECT_STREQ(MatMulOrderName(ActiveMatMulOrder()), "interleaved");
  EXPECT_TRUE(RunsOnInterleavedRows(GgmlType::kQ4_1));
  EXPECT_TRUE(RunsOnInterleavedRows(GgmlType::kQ8_0));
  EXPECT_FALSE(RunsOnInterleavedRows(GgmlType::kQ4_K));
}

// The reference against the float dot product of dequantized weights with the
// unquantized activations. Float weight types see float activations: only summation
// error. Quantized types see activations rounded to the nearest multiple of their block
// step d = amax / 127, an error of at most d / 2 per element (plus the half-precision
// rounding of d for 32-element blocks), so
//   |error| <= sum_i |w_i| * d_block(i) / 2  (+ that rounding, + summation error),
// a hard bound (not a statistical one) that the test uses as its tolerance:
// QuantizedDotBound (tests/testing/matmul_bounds.h), the CUDA test's too.
TEST(MatMulTest, ReferenceMatchesDequantizedDotWithinActivationRounding) {
  std::mt19937 rng(std::random_device{}());
  for (GgmlType type : kAllTypes) {
    for (int64_t cols : ColsFor(type)) {
      const int64_t rows = 11, tokens = 3;
      const Matrix m = RandomMatrix(type, rows, cols, rng);
      const std::vector<float> xf = RandomActivations(tokens, cols, rng);
      PackedActivations x;
      PackActivations(type, xf.data(), tokens, cols, &x);
      const std::vector<float> got = RunRows(MatMulRowsReference, m, x, 0, rows);
      for (int64_t t = 0; t < tokens; ++t) {
        const float* xt = xf.data() + t * cols;
        for (int64_t r = 0; r < rows; ++r) {
          const float* w = m.dequantized.data() + r * cols;
          double exact = 0;
          for (int64_t i = 0; i < cols; ++i) exact += static_cast<double>(w[i]) * xt[i];
          const double bound = QuantizedDotBound(type, w, xt, cols);
          ASSERT_NEAR(got[t * rows + r], exact, bound)
              << Name(type) << " cols=" << cols << " t=" << t << " r=" << r;
        }
      }
    }
  }
}

// Batch invariance: a token's outputs are bitwise the same alone, at any position in a
// batch of 1..11, 16 or 21 tokens (and some positions of 40- and 45-token batches) with
// other random tokens, and for any split of the rows.
void ExpectBatchInvariant(const std::string& path_name, RowsFn fn, GgmlType type, int64_t cols,
                          std::mt19937& rng) {
  const int64_t rows = 29;
  const Matrix m = RandomMatrix(type, rows, cols, rng);
  const std::vector<float> probe = RandomActivations(1, cols, rng);
  PackedActivations x;
  PackActivations(type, probe.data(), 1, cols, &x);
  const std::vector<float> alone = RunRows(fn, m, x, 0, rows);
  // Every tile size of every path (up to 9 tokens; Q4_1 on AVX-512 pairs tokens in tiles of
  // up to 10, so 10, 11, 16 and 21 split into balanced tiles with a repeated last token),
  // and batches of more than 4 tiles (two passes over the rows).
  for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 21, 40, 45}) {
    const int64_t step = tokens > 11 ? 7 : 1;
    for (int64_t position = 0; position < tokens; position += step) {
      std::vector<float> batch = RandomActivations(tokens, cols, rng);
      std::copy(probe.begin(), probe.end(), batch.begin() + position * cols);
      PackActivations(type, batch.data(), tokens, cols, &x);  // reuses x's buffer
      // Rows in three uneven ranges, computed in reverse order.
      std::vector<float> y(tokens * rows, NAN);
      for (auto [begin, end] : {std::pair<int64_t, int64_t>{17, 29}, {5, 17}, {0, 5}}) {
        fn(type, m.bytes.data(), cols, x, begin, end, y.data(), rows);
      }
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(y[position * rows + r], alone[r])
            << path_name << " " << Name(type) << " cols=" << cols << " tokens=" << tokens
            << " position=" << position << " r=" << r;
      }
    }
  }
}

TEST(MatMulTest, OutputsAreBitwiseIndependentOfBatchAndRowRange) {
  std::mt19937 rng(std::random_device{}());
  std::vector<Path> paths = FastPaths();
  paths.push_back({"dispatched", MatMulRows});
  paths.push_back({"reference", MatMulRowsReference});
  for (const Path& path : paths) {
    for (GgmlType type : kAllTypes) {
      for (int64_t cols : {ColsFor(type).front(), ColsFor(type).back()}) {
        ExpectBatchInvariant(path.name, path.fn, type, cols, rng);
      }
    }
  }
}

// The K-quant kernels of the AVX-512 VNNI path (vpdpwssd, Q6_K's offset as the sum's first
// term) form the same exact integer sums as the AVX-512 path's and then the same float
// operations, so the two agree bitwise, alone and in tiles, on fresh random data.
TEST(MatMulTest, KQuantsVnniMatchAvx512Bitwise) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq") ||
      !__builtin_cpu_supports("avx512vnni")) {
    GTEST_SKIP() << "no AVX-512 VNNI on this machine";
  }
  std::mt19937 rng(std::random_device{}());
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    for (int64_t cols : ColsFor(type)) {
      const int64_t rows = 23;
      const Matrix m = RandomMatrix(type, rows, cols, rng);
      for (int64_t tokens : {1, 2, 5, 9, 11, 21}) {
        const std::vector<float> batch = RandomActivations(tokens, cols, rng);
        PackedActivations x;
        PackActivations(type, batch.data(), tokens, cols, &x);
        const std::vector<float> plain = RunRows(internal::MatMulRowsAvx512, m, x, 0, rows);
        const std::vector<float> vnni = RunRows(internal::MatMulRowsAvx512Vnni, m, x, 0, rows);
        for (size_t i = 0; i < plain.size(); ++i) {
          ASSERT_EQ(vnni[i], plain[i])
              << Name(type) << " cols=" << cols << " tokens=" << tokens << " output=" << i;
        }
      }
    }
  }
}

// Large batches (more than one pass of 4 token tiles over the rows), a row sub-range and an
// output stride wider than the matrix: outputs of other rows and the stride padding
// stay untouched, and the computed ones match the reference.
TEST(MatMulTest, WritesExactlyItsRowRangeForLargeBatches) {
  std::mt19937 rng(std::random_device{}());
  std::vector<Path> paths = FastPaths();
  paths.push_back({"reference", MatMulRowsReference});
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    const int64_t cols = ColsFor(type).back(), rows = 23, tokens = 70, stride = 31, begin = 4,
                  end = 19;
    const Matrix m = RandomMatrix(type, rows, cols, rng);
    const std::vector<float> xf = RandomActivations(tokens, cols, rng);
    PackedActivations x;
    PackActivations(type, xf.data(), tokens, cols, &x);
    std::vector<float> want(tokens * stride);
    MatMulRowsReference(type, m.bytes.data(), cols, x, begin, end, want.data(), stride);
    for (const Path& path : paths) {
      std::vector<float> y(tokens * stride, -12345.0f);
      path.fn(type, m.bytes.data(), cols, x, begin, end, y.data(), stride);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < stride; ++r) {
          const float got = y[t * stride + r];
          if (r < begin || r >= end) {
            ASSERT_EQ(got, -12345.0f)
                << path.name << " " << Name(type) << " wrote t=" << t << " r=" << r;
          } else {
            const double bound = SummationBound(cols, Mass(m, r, xf.data() + t * cols));
            ASSERT_NEAR(got, want[t * stride + r], bound)
                << path.name << " " << Name(type) << " t=" << t << " r=" << r;
          }
        }
      }
    }
  }
}

TEST(MatMulTest, EmptyBatchOrRowRangeIsANoOp) {
  std::mt19937 rng(std::random_device{}());
  const Matrix m = RandomMatrix(GgmlType::kQ4_1, 4, 64, rng);
  PackedActivations x;
  PackActivations(GgmlType::kQ4_1, nullptr, 0, 64, &x);
  float y[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  MatMulRows(GgmlType::kQ4_1, m.bytes.data(), 64, x, 0, 4, y, 4);
  const std::vector<float> xf = RandomActivations(2, 64, rng);
  PackActivations(GgmlType::kQ4_1, xf.data(), 2, 64, &x);
  MatMulRows(GgmlType::kQ4_1, m.bytes.data(), 64, x, 2, 2, y, 4);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], i + 1.0f);
}

// MatMulRows takes the path MatMulPathName() names (the best one the CPU and the
// SPLITSPEC_CPU_ISA cap allow), bit for bit.
TEST(MatMulTest, DispatchUsesTheNamedPath) {
  std::mt19937 rng(std::random_device{}());
  const std::string name = MatMulPathName();
  RowsFn expected = MatMulRowsReference;
  for (const Path& path : FastPaths()) {
    if (path.name == name) expected = path.fn;
  }
  if (name != "scalar") {
    ASSERT_NE(expected, MatMulRowsReference) << "no path named " << name;
  }
  for (GgmlType type : kAllTypes) {
    const int64_t cols = ColsFor(type).back(), rows = 19, tokens = 3;
    const Matrix m = RandomMatrix(type, rows, cols, rng);
    const std::vector<float> xf = RandomActivations(tokens, cols, rng);
    PackedActivations x;
    PackActivations(type, xf.data(), tokens, cols, &x);
    const std::vector<float> want = RunRows(expected, m, x, 0, rows);
    const std::vector<float> got = RunRows(MatMulRows, m, x, 0, rows);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << name << " " << Name(type) << " i=" << i;
  }
}

// The AVX2 activation packer writes exactly the scalar packer's bytes.
TEST(PackActivationsTest, Avx2PackerMatchesScalarBytes) {
  if (!CpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(std::random_device{}());
  for (int64_t cols : {256, 512, 1536}) {
    std::vector<float> x = RandomActivations(1, cols, rng);
    std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block: d = 0
    // Blocks whose half-precision d or d * sum is subnormal, tiny, or overflows.
    for (int i = 64; i < 96; ++i) x[i] *= 1e-6f;
    for (int i = 96; i < 128; ++i) x[i] *= 3e-9f;
    for (int i = 128; i < 160; ++i) x[i] = 4000.0f + static_cast<float>(i);
    const int64_t bytes32 = PackedTokenBytes(GgmlType::kQ8_0, cols);
    std::vector<uint8_t> a(bytes32, 0xAB), b(bytes32, 0xAB);
    internal::QuantizeBlocks32Scalar(x.data(), cols, ViewBlocks32(a.data(), cols));
    internal::QuantizeBlocks32Avx2(x.data(), cols, ViewBlocks32(b.data(), cols));
    EXPECT_EQ(a, b) << "cols=" << cols;
    std::vector<ActivationBlock256> c(cols / 256), d(cols / 256);
    internal::QuantizeBlocks256Scalar(x.data(), cols, c.data());
    internal::QuantizeBlocks256Avx2(x.data(), cols, d.data());
    EXPECT_EQ(std::memcmp(c.data(), d.data(), c.size() * sizeof(ActivationBlock256)), 0)
        << "cols=" << cols;
  }
}

// Packing in parts (SizeActivations, then PackActivationTokens over ranges in any order,
// as RunMatMulJobs does on several threads) writes PackActivations' bytes, for every
// activation family, at ragged token counts and split points.
TEST(PackActivationsTest, PackingInPartsWritesTheSameBytes) {
  std::mt19937 rng(std::random_device{}());
  for (GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kF16}) {
    const int64_t cols = 512;
    for (int64_t tokens : {1, 5, 16, 33}) {
      const std::vector<float> x = RandomActivations(tokens, cols, rng);
      PackedActivations whole, parts;
      PackActivations(type, x.data(), tokens, cols, &whole);
      SizeActivations(type, tokens, cols, &parts);
      const int64_t split = static_cast<int64_t>(rng() % (tokens + 1));
      PackActivationTokens(x.data(), split, tokens, &parts);  // the later part first
      PackActivationTokens(x.data(), 0, split, &parts);
      EXPECT_EQ(parts.tokens, whole.tokens);
      EXPECT_EQ(parts.cols, whole.cols);
      EXPECT_EQ(parts.weight_type, whole.weight_type);
      ASSERT_EQ(parts.data.size(), whole.data.size());
      EXPECT_TRUE(parts.data == whole.data)
          << Name(type) << " tokens=" << tokens << " split=" << split;
    }
  }
}

// llama.cpp's Q8_1 activation blocks: q = round-half-even(x * (127 / amax)) within half a
// step of x, the scale stored as the half-precision value of amax / 127, and the scaled
// sum as the half-precision value of (amax / 127) * sum(q).
TEST(PackActivationsTest, QuantizedActivationsAreLlamaCppQ8_1Blocks) {
  std::mt19937 rng(std::random_device{}());
  const int64_t cols = 576;
  const std::vector<float> x = RandomActivations(2, cols, rng);
  PackedActivations packed;
  PackActivations(GgmlType::kQ4_1, x.data(), 2, cols, &packed);
  const int64_t token_bytes = PackedTokenBytes(GgmlType::kQ4_1, cols);
  for (int64_t t = 0; t < 2; ++t) {
    const Blocks32View v = ViewBlocks32(packed.data.data() + t * token_bytes, cols);
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* xb = x.data() + t * cols + 32 * b;
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float d = amax / 127.0f;
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int8_t q = v.qs[32 * b + i];
        EXPECT_EQ(q, static_cast<int8_t>(std::nearbyint(xb[i] * (127.0f / amax)))) << b << " " << i;
        EXPECT_LE(std::fabs(d * q - xb[i]), d * 0.5f * 1.0001f) << b << " " << i;
        sum += q;
      }
      EXPECT_EQ(v.sum[b], static_cast<float>(sum));
      EXPECT_EQ(v.d[b], RoundToHalf(d));
      EXPECT_EQ(v.d_sum[b], RoundToHalf(d * static_cast<float>(sum)));
    }
  }
}

}  // namespace
}  // namespace splitspec::kernels
