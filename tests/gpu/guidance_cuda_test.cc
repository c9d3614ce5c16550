// The CUDA guided-logit kernel (kernels/cuda/guidance.h) against the CPU scalar
// reference (kernels/cpu/guidance.h), bit for bit: random logits with -inf masks
// in either input, per-row scales including exactly 1 (a copy of cond) and 0, at
// ragged sizes (fewer, equal and more columns than threads per block, a
// vocabulary-sized row), out of place and in place over cond and over uncond.
#include "kernels/cuda/guidance.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/guidance.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Device copies of host vectors, freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : bytes_(host.size() * sizeof(float)) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* data() const { return data_; }
  std::vector<float> Read() const {
    std::vector<float> host(bytes_ / sizeof(float));
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  size_t bytes_;
  float* data_ = nullptr;
};

void ExpectBitwiseEqual(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(Bits(got[i]), Bits(want[i]))
        << label << " i=" << i << " " << got[i] << " vs " << want[i];
}

TEST(GuidanceCudaTest, MatchesCpuReferenceBitwise) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> logit(0.0f, 6.0f);
  std::uniform_real_distribution<float> scale(0.0f, 5.0f);
  std::uniform_int_distribution<int> mask(0, 19);  // one entry in 20 masked per input
  for (int cols : {1, 7, 255, 256, 257, 4099, 49152}) {
    const int rows = 5;
    std::vector<float> cond(rows * cols), uncond(rows * cols);
    for (float& x : cond) x = mask(rng) == 0 ? -INFINITY : logit(rng);
    for (float& x : uncond) x = mask(rng) == 0 ? -INFINITY : logit(rng);
    const std::vector<float> scales = {scale(rng), 1.0f, 0.0f, scale(rng), 1.5f};
    std::vector<float> want(cond.size());
    GuidedLogitsRowsReference(cond.data(), uncond.data(), scales.data(), want.data(), rows, cols);
    const std::string label = "cols=" + std::to_string(cols);

    DeviceBuffer d_cond(cond), d_uncond(uncond), d_scales(scales), d_out(cond);
    ASSERT_TRUE(LaunchGuidedLogitsRows(d_cond.data(), d_uncond.data(), d_scales.data(),
                                       d_out.data(), rows, cols, nullptr)
                    .ok());
    ExpectBitwiseEqual(d_out.Read(), want, label + " out of place");
    ASSERT_TRUE(LaunchGuidedLogitsRows(d_cond.data(), d_uncond.data(), d_scales.data(),
                                       d_cond.data(), rows, cols, nullptr)
                    .ok());
    ExpectBitwiseEqual(d_cond.Read(), want, label + " in place over cond");
    DeviceBuffer d_cond2(cond);
    ASSERT_TRUE(LaunchGuidedLogitsRows(d_cond2.data(), d_uncond.data(), d_scales.data(),
                                       d_uncond.data(), rows, cols, nullptr)
                    .ok());
    ExpectBitwiseEqual(d_uncond.Read(), want, label + " in place over uncond");
  }
}

TEST(GuidanceCudaTest, RejectsBadShapeNamingIt) {
  absl::Status status = LaunchGuidedLogitsRows(nullptr, nullptr, nullptr, nullptr, 1, 0, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cols=0"), std::string::npos) << status;
  status = LaunchGuidedLogitsRows(nullptr, nullptr, nullptr, nullptr, -1, 4, nullptr);
  EXPECT_NE(status.message().find("rows=-1"), std::string::npos) << status;
  // Zero rows launch nothing and succeed, device or not.
  EXPECT_TRUE(LaunchGuidedLogitsRows(nullptr, nullptr, nullptr, nullptr, 0, 4, nullptr).ok());
}

}  // namespace
}  // namespace splitspec::kernels
