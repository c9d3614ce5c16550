// What kernels/cuda/device_info.h measures on a real device: the copy bandwidth
// bench decode's roofline comes from.
#include "kernels/cuda/device_info.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

using ::testing::HasSubstr;

class DeviceInfoCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
};

// Any GPU of the last decade copies between 10 GB/s and 100 TB/s (read + written).
TEST_F(DeviceInfoCudaTest, CopyBandwidthIsPlausible) {
  const absl::StatusOr<double> gb_s = MeasureCudaCopyBandwidth(0, uint64_t{256} << 20, 3);
  ASSERT_TRUE(gb_s.ok()) << gb_s.status();
  EXPECT_GT(*gb_s, 10.0);
  EXPECT_LT(*gb_s, 100000.0);
  std::printf("[ device copy ] cuda:0: %.1f GB/s\n", *gb_s);
}

// An allocation no device has fails by name and leaves no error for the next check.
TEST_F(DeviceInfoCudaTest, AnImpossibleSizeFailsAndLeavesNoStickyError) {
  const absl::StatusOr<double> gb_s = MeasureCudaCopyBandwidth(0, uint64_t{1} << 50, 1);
  ASSERT_FALSE(gb_s.ok());
  EXPECT_THAT(std::string(gb_s.status().message()), HasSubstr("cuda:0"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace splitspec::kernels
