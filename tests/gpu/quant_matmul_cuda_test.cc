// The CUDA matmuls of quantized weights (kernels/cuda/quant_matmul.h) against the
// CPU scalar reference (MatMulRowsReference), the K-quants first: fresh random
// weights and activations each run (seed printed), ragged sizes (rows not a
// multiple of the 4 rows per thread block, tokens not a multiple of the 8-token
// tile, super-block counts not a multiple of the 4 lane groups), the output
// poisoned with NaN first (every element must be written, and the stride padding
// must stay untouched). Also: one token at a time gives the batch's bits, and the
// embedding kernel dequantizes K-quant rows as DequantizeRow does.
//
// Bounds, relative (max |cuda - cpu| over a matrix / max |cpu|):
//   vs MatMulRowsReference   1e-5 for every quantized type. The device quantizes the
//                            activations with the CPU packer's float operations and
//                            forms the same integer block products, so only the
//                            float sum across (super-)blocks differs in order.
// And per output, vs the float product (dequantized weights . unquantized activations,
// in double): QuantizedDotBound (tests/testing/matmul_bounds.h), the bound the CPU
// reference meets in tests/unit/kernels/matmul_test.cc: half an activation step
// (amax / 127 of the output's own blocks) per weight, plus summation error. (A bound
// relative to the matrix's largest output was ill-conditioned: 0.586 for one output
// of one row of 256 Q4_1 columns on the first GPU run, with the kernel right.)
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
// four lane groups); tokens across 1, 2 and 3 tiles; rows across partial thread blocks.
constexpr Shape kShapes[] = {{1, 256, 1}, {7, 768, 3}, {33, 1280, 9}, {130, 2560, 17}};

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
double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return max_abs > 0 ? max_diff / max_abs : max_diff;
}

// The device matmul of w and x: y [tokens, rows] (read back from a poisoned
// [tokens, rows + 3] buffer whose padding must stay NaN).
std::vector<float> DeviceMatMul(GgmlType type, const std::vector<uint8_t>& w,
                                const std::vector<float>& x, const Shape& s) {
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
        failures += " (t=" + std::to_string(t) + " r=" + std::to_string(r) +
                    ": error " + std::to_string(error) + " > bound " + std::to_string(bound) + ")";
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
    const std::vector<float> got = DeviceMatMul(type, w, x, s);
    const double vs_reference = RelativeError(got, CpuReference(type, w, x, s));
    double vs_float = 0;  // the largest error / bound ratio over the outputs
    EXPECT_EQ(OutsideTheFloatBound(type, w, x, s, got, &vs_float), "") << label;
    EXPECT_LE(vs_reference, 1e-5) << label;
    std::printf("[ cuda matmul ] %s: vs reference %.3g, vs float %.3g of the bound\n",
                label.c_str(), vs_reference, vs_float);
  }
}

TEST_P(QuantMatMulCudaTest, OneTokenAtATimeGivesTheBatchsBits) {
  const GgmlType type = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const Shape s{37, 1280, 11};
  const std::vector<uint8_t> w = RandomWeights(type, s, rng);
  const std::vector<float> x = RandomActivations(s, rng);
  const std::vector<float> batch = DeviceMatMul(type, w, x, s);
  for (int64_t t = 0; t < s.tokens; ++t) {
    const std::vector<float> one_x(x.begin() + t * s.cols, x.begin() + (t + 1) * s.cols);
    const std::vector<float> one = DeviceMatMul(type, w, one_x, {s.rows, s.cols, 1});
    EXPECT_EQ(std::memcmp(one.data(), batch.data() + t * s.rows, s.rows * sizeof(float)), 0)
        << "token " << t;
  }
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
                                           GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return TypeName(info.param);
                         });

}  // namespace
}  // namespace splitspec::kernels
