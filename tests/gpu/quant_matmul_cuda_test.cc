// The CUDA matmuls (kernels/cuda/quant_matmul.h: the weight-streaming matvec of
// kernels/cuda/matvec_tiling.h, and beyond 16 tokens for the quantized types the
// tensor-core kernels of kernels/cuda/mma_tiling.h, which must give the matvec's
// bits) against the CPU: fresh random weights and activations each run (seed
// printed), ragged sizes (super-block counts not a multiple of a warp's 32 units,
// row counts not a multiple of the 4 rows of a thread block, tokens across 1, 2 and
// 3 tiles of 16), the output poisoned with NaN first (every element must be
// written, and the stride padding must stay untouched). Also: the kernel equals its
// CPU emulation (EmulateMatVec over the device's own quantized activations) bit for
// bit, at real model shapes too and at every token count 1..67; one token alone,
// every verify block of 2..16 tokens and a 33-token batch give a token the same
// bits, as does SmolLM2's 49,152-row head over a 40-token prefill; a fused launch
// (Q/K/V, gate/up) gives each matrix the bits of its own launch; and the embedding
// kernel dequantizes rows as DequantizeRow does.
//
// Bounds, per output (S = sum_c |w_c x_c| in double, the dequantized weights):
//   vs the emulation         0: the same operations in the same order.
//   vs MatMulRowsReference   1e-5 of the largest S over the matrix's outputs: the same
//                            8-bit activations and integer block products (the float
//                            types: the same products), only the float sum in another
//                            order, whose error scales with S, not with the output.
//                            Relative to the largest output it was ill-conditioned:
//                            1.6e-4 for the one output of a bf16 row of 256 columns
//                            (H100, 2026-11-27), with the kernel equal to its emulation.
//   vs the float product     QuantizedDotBound (tests/testing/matmul_bounds.h), the
//                            bound the CPU reference meets in tests/unit/kernels/
//                            matmul_test.cc: half an activation step per weight, plus
//                            summation error. A bound relative to the matrix's largest
//                            output was ill-conditioned: 0.586 for one output of one row
//                            of 256 Q4_1 columns on the first GPU run, with the kernel right.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize_weights.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/matvec_tiling.h"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/transformer_kernels.h"
#include "tests/testing/matmul_bounds.h"

namespace splitspec::kernels {
namespace {

// A device copy of a host vector, freed on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host) : count_(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), Bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), Bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* data() const { return data_; }
  std::vector<T> Read() const {
    std::vector<T> host(count_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, Bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  size_t Bytes() const { return count_ * sizeof(T); }
  size_t count_;
  T* data_ = nullptr;
};

struct Shape {
  int64_t rows, cols, tokens;
};

// 1 row / 1 token; one super-block; 5 and 10 super-blocks (not a multiple of the
// 128 threads' units); tokens across 1, 2 and 3 tiles of 16; a 1B-shaped row.
constexpr Shape kShapes[] = {
    {1, 256, 1}, {7, 768, 3}, {33, 1280, 17}, {130, 2560, 33}, {64, 2048, 5}};

std::string TypeName(GgmlType type) { return GetGgmlTypeTraits(type).name; }

// Rows of normal values with a per-row scale over two decades, quantized to `type`.
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

// Normal activations with a few outliers; the last token of a multi-token batch is all
// zero (the quantizers' amax == 0 branch).
std::vector<float> RandomActivations(const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> outlier(0, 99);
  std::vector<float> x(s.tokens * s.cols);
  for (float& v : x) v = normal(rng) * (outlier(rng) == 0 ? 20.0f : 1.0f);
  if (s.tokens > 1) std::fill(x.end() - s.cols, x.end(), 0.0f);
  return x;
}

// max |got - want| / max |want| over the valid outputs.
// The largest S = sum_c |w_rc x_tc| (dequantized weights, double) over the outputs: the
// scale of a float summation's rounding error.
double LargestAbsoluteDot(GgmlType type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                          const Shape& s) {
  std::vector<float> row(s.cols);
  double largest = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    DequantizeRow(type, w.data() + r * RowBytes(type, s.cols), row.data(), s.cols);
    for (int64_t t = 0; t < s.tokens; ++t) {
      double sum = 0;
      for (int64_t c = 0; c < s.cols; ++c) sum += std::fabs(double{row[c]} * x[t * s.cols + c]);
      largest = std::max(largest, sum);
    }
  }
  return largest;
}

// max |got - want| over the outputs, divided by `scale` (infinite when got has a NaN).
double ErrorOfScale(const std::vector<float>& got, const std::vector<float>& want, double scale) {
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return scale > 0 ? max_diff / scale : max_diff;
}

// The device matmul of w and x: y [tokens, rows] (read back from a poisoned
// [tokens, rows + 3] buffer whose padding must stay NaN).
std::vector<float> DeviceMatMul(GgmlType type, const std::vector<uint8_t>& w,
                                const std::vector<float>& x, const Shape& s,
                                matvec::HostQ8Activations* xq_out = nullptr) {
  const int64_t stride = s.rows + 3;
  DeviceBuffer<uint8_t> d_w(w);
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<int8_t> qs(std::vector<int8_t>(s.tokens * s.cols, 0));
  const std::vector<float> scratch(s.tokens * s.cols / 32, 0.0f);
  DeviceBuffer<float> d(scratch), d_sum(scratch), sum(scratch);
  DeviceBuffer<float> y(
      std::vector<float>(s.tokens * stride, std::numeric_limits<float>::quiet_NaN()));
  const DeviceQ8Activations xq{qs.data(), d.data(), d_sum.data(), sum.data()};
  EXPECT_TRUE(LaunchQuantizeActivations(CudaMatMulActivationLayout(type), d_x.data(), s.tokens,
                                        s.cols, xq, nullptr)
                  .ok());
  const DeviceMatrix m{type, d_w.data(), s.rows, s.cols};
  const absl::Status launched =
      LaunchMatMul(m, d_x.data(), &xq, s.tokens, y.data(), stride, nullptr);
  EXPECT_TRUE(launched.ok()) << launched;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (xq_out != nullptr) {
    xq_out->qs = qs.Read();
    xq_out->d = d.Read();
    xq_out->d_sum = d_sum.Read();
    xq_out->sum = sum.Read();
  }
  const std::vector<float> padded = y.Read();
  std::vector<float> out(s.tokens * s.rows);
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t r = 0; r < stride; ++r) {
      const float v = padded[t * stride + r];
      if (r < s.rows) {
        out[t * s.rows + r] = v;
      } else {
        EXPECT_TRUE(std::isnan(v)) << "padding written at token " << t << " column " << r;
      }
    }
  }
  return out;
}

std::vector<float> CpuReference(GgmlType type, const std::vector<uint8_t>& w,
                                const std::vector<float>& x, const Shape& s) {
  PackedActivations packed;
  PackActivations(type, x.data(), s.tokens, s.cols, &packed);
  std::vector<float> y(s.tokens * s.rows);
  MatMulRowsReference(type, w.data(), s.cols, packed, 0, s.rows, y.data(), s.rows);
  return y;
}

// The outputs (token t, row r) farther from the float product than QuantizedDotBound,
// described; empty when every output is within its bound.
std::string OutsideTheFloatBound(GgmlType type, const std::vector<uint8_t>& w,
                                 const std::vector<float>& x, const Shape& s,
                                 const std::vector<float>& got, double* worst_ratio) {
  std::vector<float> row(s.cols);
  std::string failures;
  *worst_ratio = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    DequantizeRow(type, w.data() + r * RowBytes(type, s.cols), row.data(), s.cols);
    for (int64_t t = 0; t < s.tokens; ++t) {
      const float* xt = x.data() + t * s.cols;
      double exact = 0;
      for (int64_t c = 0; c < s.cols; ++c) exact += static_cast<double>(row[c]) * xt[c];
      const double bound = QuantizedDotBound(type, row.data(), xt, s.cols);
      const double error = std::fabs(static_cast<double>(got[t * s.rows + r]) - exact);
      if (!std::isfinite(got[t * s.rows + r])) *worst_ratio = INFINITY;
      if (bound > 0) *worst_ratio = std::max(*worst_ratio, error / bound);
      if (!(error <= bound) && failures.size() < 400) {
        failures += " (t=" + std::to_string(t) + " r=" + std::to_string(r) + ": error " +
                    std::to_string(error) + " > bound " + std::to_string(bound) + ")";
      }
    }
  }
  return failures;
}

class QuantMatMulCudaTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(QuantMatMulCudaTest, MatchesTheCpuReferenceWithinTheStatedBounds) {
  const GgmlType type = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const Shape& s : kShapes) {
    const std::string label = TypeName(type) + " rows=" + std::to_string(s.rows) +
                              " cols=" + std::to_string(s.cols) +
                              " tokens=" + std::to_string(s.tokens);
    const std::vector<uint8_t> w = RandomWeights(type, s, rng);
    const std::vector<float> x = RandomActivations(s, rng);
    matvec::HostQ8Activations xq;
    const std::vector<float> got = DeviceMatMul(type, w, x, s, &xq);
    const double vs_reference =
        ErrorOfScale(got, CpuReference(type, w, x, s), LargestAbsoluteDot(type, w, x, s));
    EXPECT_LE(vs_reference, 1e-5) << label;
    double worst = 0;  // the largest error / bound ratio over the outputs
    EXPECT_EQ(OutsideTheFloatBound(type, w, x, s, got, &worst), "") << label;
    std::vector<float> emulated(got.size());
    matvec::EmulateMatVec(type, w.data(), s.rows, s.cols, xq.view(), x.data(), s.tokens,
                          emulated.data(), s.rows);
    size_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      differing += std::memcmp(&got[i], &emulated[i], sizeof(float)) != 0;
    }
    EXPECT_EQ(differing, 0u) << label << ": outputs not bitwise the emulation's";
    std::printf(
        "[ cuda matmul ] %s: vs reference %.3g, vs float %.3g of its bound, "
        "%zu outputs differ from the emulation\n",
        label.c_str(), vs_reference, worst, differing);
  }
}

TEST_P(QuantMatMulCudaTest, OneTokenAtATimeGivesTheBatchsBits) {
  const GgmlType type = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const Shape s{37, 1280, 33};
  const std::vector<uint8_t> w = RandomWeights(type, s, rng);
  const std::vector<float> x = RandomActivations(s, rng);
  const std::vector<float> batch = DeviceMatMul(type, w, x, s);
  for (int64_t t = 0; t < s.tokens; ++t) {
    const std::vector<float> one_x(x.begin() + t * s.cols, x.begin() + (t + 1) * s.cols);
    const std::vector<float> one = DeviceMatMul(type, w, one_x, {s.rows, s.cols, 1});
    EXPECT_EQ(std::memcmp(one.data(), batch.data() + t * s.rows, s.rows * sizeof(float)), 0)
        << "token " << t;
  }
  // Verify blocks of n = 2..16 tokens from token 5: each slot has its token's bits.
  for (int64_t n = 2; n <= 16; ++n) {
    const std::vector<float> block_x(x.begin() + 5 * s.cols, x.begin() + (5 + n) * s.cols);
    const std::vector<float> block = DeviceMatMul(type, w, block_x, {s.rows, s.cols, n});
    EXPECT_EQ(std::memcmp(block.data(), batch.data() + 5 * s.rows, n * s.rows * sizeof(float)), 0)
        << "block of " << n;
  }
}

// Q/K/V-like: three matrices of one type in one launch, each with its own launch's bits.
TEST_P(QuantMatMulCudaTest, AFusedLaunchGivesEachMatrixItsOwnBits) {
  const GgmlType type = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t cols = 512, tokens = 7;
  const int64_t rows[3] = {96, 32, 33};
  std::vector<std::vector<uint8_t>> w;
  for (int64_t r : rows) w.push_back(RandomWeights(type, {r, cols, tokens}, rng));
  const std::vector<float> x = RandomActivations({1, cols, tokens}, rng);
  DeviceBuffer<float> d_x(x);
  DeviceBuffer<int8_t> qs(std::vector<int8_t>(tokens * cols, 0));
  const std::vector<float> scratch(tokens * cols / 32, 0.0f);
  DeviceBuffer<float> d(scratch), d_sum(scratch), sum(scratch);
  const DeviceQ8Activations xq{qs.data(), d.data(), d_sum.data(), sum.data()};
  ASSERT_TRUE(LaunchQuantizeActivations(CudaMatMulActivationLayout(type), d_x.data(), tokens, cols,
                                        xq, nullptr)
                  .ok());
  DeviceBuffer<uint8_t> w0(w[0]), w1(w[1]), w2(w[2]);
  const DeviceMatrix m[3] = {{type, w0.data(), rows[0], cols},
                             {type, w1.data(), rows[1], cols},
                             {type, w2.data(), rows[2], cols}};
  const std::vector<float> nan(tokens * 100, std::numeric_limits<float>::quiet_NaN());
  DeviceBuffer<float> fused0(nan), fused1(nan), fused2(nan), alone0(nan), alone1(nan), alone2(nan);
  const MatMulJob jobs[3] = {
      {m[0], fused0.data(), 100}, {m[1], fused1.data(), 100}, {m[2], fused2.data(), 100}};
  ASSERT_TRUE(LaunchMatMuls(jobs, d_x.data(), &xq, tokens, nullptr).ok());
  ASSERT_TRUE(LaunchMatMul(m[0], d_x.data(), &xq, tokens, alone0.data(), 100, nullptr).ok());
  ASSERT_TRUE(LaunchMatMul(m[1], d_x.data(), &xq, tokens, alone1.data(), 100, nullptr).ok());
  ASSERT_TRUE(LaunchMatMul(m[2], d_x.data(), &xq, tokens, alone2.data(), 100, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const DeviceBuffer<float>* fused[3] = {&fused0, &fused1, &fused2};
  const DeviceBuffer<float>* alone[3] = {&alone0, &alone1, &alone2};
  for (int j = 0; j < 3; ++j) {
    const std::vector<float> a = fused[j]->Read();
    const std::vector<float> b = alone[j]->Read();
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < 100; ++r) {
        const float got = a[t * 100 + r];
        if (r >= rows[j]) {
          EXPECT_TRUE(std::isnan(got)) << "matrix " << j << " wrote past its rows at " << r;
        } else {
          EXPECT_EQ(std::memcmp(&got, &b[t * 100 + r], sizeof(float)), 0)
              << "matrix " << j << " token " << t << " row " << r;
        }
      }
    }
  }
}

// The real models' shapes (few rows: a row's arithmetic depends on cols only):
// SmolLM2-135M 576 / 1536, Llama-3.2-1B 2048 / 8192, Llama-3-8B 4096 / 14336, at
// 1, 2, 3, 5, 9, 16 and 17 tokens (every tile width the kernel is compiled for:
// 1, 2, 4, 8, 16, and a second tile), equal the emulation bit for bit; 25 rows
// leave three warps of the last block without a row.
TEST_P(QuantMatMulCudaTest, RealShapesEqualTheEmulationBitForBit) {
  const GgmlType type = GetParam();
  std::mt19937 rng(36);
  const int block = GetGgmlTypeTraits(type).block_size;
  for (int64_t cols : {576, 1536, 2048, 4096, 8192, 14336}) {
    if (cols % block != 0) continue;
    for (int64_t tokens : {1, 2, 3, 5, 9, 16, 17, 67}) {
      const Shape s{25, cols, tokens};
      const std::vector<uint8_t> w = RandomWeights(type, s, rng);
      const std::vector<float> x = RandomActivations(s, rng);
      matvec::HostQ8Activations xq;
      const std::vector<float> got = DeviceMatMul(type, w, x, s, &xq);
      std::vector<float> emulated(got.size());
      matvec::EmulateMatVec(type, w.data(), s.rows, s.cols, xq.view(), x.data(), s.tokens,
                            emulated.data(), s.rows);
      EXPECT_EQ(std::memcmp(got.data(), emulated.data(), got.size() * sizeof(float)), 0)
          << TypeName(type) << " cols=" << cols << " tokens=" << tokens;
    }
  }
}

// Every token count 1..67 (the tensor cores from 17 on for the quantized types: ragged
// last tiles of 16 tokens, 37 rows a ragged last tile of 32) equals the matvec's
// emulation bit for bit at SmolLM2-135M's widths (576; the K-quants at its FFN's 1536).
TEST_P(QuantMatMulCudaTest, EveryTokenCountEqualsTheEmulationBitForBit) {
  const GgmlType type = GetParam();
  const int64_t cols = GetGgmlTypeTraits(type).block_size == 256 ? 1536 : 576;
  std::mt19937 rng(3636);
  const Shape all{37, cols, 67};
  const std::vector<uint8_t> w = RandomWeights(type, all, rng);
  const std::vector<float> x = RandomActivations(all, rng);
  for (int64_t tokens = 1; tokens <= all.tokens; ++tokens) {
    const Shape s{all.rows, cols, tokens};
    const std::vector<float> xn(x.begin(), x.begin() + tokens * cols);
    matvec::HostQ8Activations xq;
    const std::vector<float> got = DeviceMatMul(type, w, xn, s, &xq);
    std::vector<float> emulated(got.size());
    matvec::EmulateMatVec(type, w.data(), s.rows, s.cols, xq.view(), xn.data(), s.tokens,
                          emulated.data(), s.rows);
    ASSERT_EQ(std::memcmp(got.data(), emulated.data(), got.size() * sizeof(float)), 0)
        << TypeName(type) << " cols=" << cols << " tokens=" << tokens;
  }
}

// SmolLM2-135M's output head (49,152 x 576; the K-quants, whose rows are multiples of
// 256, at 768 columns) over a 40-token prefill (three tiles of 16, the last ragged):
// tokens 0, 13, 26 and 39 have the bits of that token alone (one matvec launch each)
// and tokens 16..31 those of a 16-token verify block (the matvec's widest tile).
TEST_P(QuantMatMulCudaTest, TheHeadOverAPrefillGivesEachTokenItsOwnBits) {
  const GgmlType type = GetParam();
  const Shape s{49152, GetGgmlTypeTraits(type).block_size == 256 ? 768 : 576, 40};
  std::mt19937 rng(36);
  const std::vector<uint8_t> w = RandomWeights(type, s, rng);
  const std::vector<float> x = RandomActivations(s, rng);
  const std::vector<float> batch = DeviceMatMul(type, w, x, s);
  for (int64_t t = 0; t < s.tokens; t += 13) {
    const std::vector<float> one_x(x.begin() + t * s.cols, x.begin() + (t + 1) * s.cols);
    const std::vector<float> one = DeviceMatMul(type, w, one_x, {s.rows, s.cols, 1});
    ASSERT_EQ(std::memcmp(one.data(), batch.data() + t * s.rows, s.rows * sizeof(float)), 0)
        << "token " << t;
  }
  const std::vector<float> block_x(x.begin() + 16 * s.cols, x.begin() + 32 * s.cols);
  const std::vector<float> block = DeviceMatMul(type, w, block_x, {s.rows, s.cols, 16});
  EXPECT_EQ(std::memcmp(block.data(), batch.data() + 16 * s.rows, 16 * s.rows * sizeof(float)), 0)
      << "tokens 16..31 as a 16-token block";
}

TEST_P(QuantMatMulCudaTest, EmbeddingRowsMatchDequantizeRow) {
  const GgmlType type = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const Shape s{19, 768, 0};
  const std::vector<uint8_t> table = RandomWeights(type, s, rng);
  const std::vector<int32_t> ids = {18, 0, 5, 5, 11};
  DeviceBuffer<uint8_t> d_table(table);
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> out(
      std::vector<float>(ids.size() * s.cols, std::numeric_limits<float>::quiet_NaN()));
  ASSERT_TRUE(LaunchEmbedRows({type, d_table.data(), s.rows, s.cols}, d_ids.data(),
                              static_cast<int64_t>(ids.size()), out.data(), nullptr)
                  .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = out.Read();
  std::vector<float> want(s.cols);
  for (size_t i = 0; i < ids.size(); ++i) {
    DequantizeRow(type, table.data() + ids[i] * RowBytes(type, s.cols), want.data(), s.cols);
    float row_max = 0.0f;
    for (float v : want) row_max = std::max(row_max, std::fabs(v));
    for (int64_t c = 0; c < s.cols; ++c) {
      // The same float operations; 1e-6 of the row's largest value leaves room for a
      // host compiler's fma contraction of d * q - m (which can cancel).
      ASSERT_NEAR(got[i * s.cols + c], want[c], 1e-6 * row_max)
          << TypeName(type) << " id " << ids[i] << " column " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(QuantizedTypes, QuantMatMulCudaTest,
                         ::testing::Values(GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                           GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return TypeName(info.param);
                         });

}  // namespace
}  // namespace splitspec::kernels
