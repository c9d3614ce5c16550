#include "kernels/cuda/softmax.h"

#include <cuda_runtime_api.h>

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/softmax.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

// CUDA softmax against the CPU scalar reference on fresh random logits at
// several ragged sizes (fewer, equal and more columns than threads per block).
TEST(SoftmaxCudaTest, MatchesCpuReference) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int cols : {1, 31, 256, 257, 4099, 49152}) {
    const int rows = 3;
    std::vector<float> logits(rows * cols);
    for (float& x : logits) x = dist(rng);
    std::vector<float> want(logits.size()), got(logits.size());
    SoftmaxRowsReference(logits.data(), want.data(), rows, cols);

    float* d_buffer = nullptr;
    const size_t bytes = logits.size() * sizeof(float);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d_buffer), bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_buffer, logits.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_TRUE(LaunchSoftmaxRows(d_buffer, d_buffer, rows, cols, nullptr).ok());
    ASSERT_EQ(cudaMemcpy(got.data(), d_buffer, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d_buffer);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5f * want[i] + 1e-30f) << "cols=" << cols << " i=" << i;
    }
  }
}

TEST(SoftmaxCudaTest, RejectsBadShape) {
  const absl::Status status = LaunchSoftmaxRows(nullptr, nullptr, 1, 0, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cols=0"), std::string::npos);
}

}  // namespace
}  // namespace splitspec::kernels
