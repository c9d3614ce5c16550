// The main() of every `gpu`-labelled test (cmake/splitspec_helpers.cmake links it in place of
// gtest_main). GPU tests GTEST_SKIP() without a device, so that they pass on machines without
// one; on a machine lent for its GPU that same skip would read as green while nothing ran.
// With SPLITSPEC_REQUIRE_GPU=1 in the environment (the GPU routine, tools/gpu/device_session.sh,
// sets it), a skipped test fails instead, and its failure says why no device was usable:
// CUDA's own error for cuda:0, or the device it did see.
//
// One listener, not a check in each test: a skip from any test, fixture or helper counts, and
// a test added later is covered without remembering to be.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace {

// What CUDA says about cuda:0, as one line: "cuda:0 is NVIDIA H200 (1 device)" or
// "cuda:0 unusable: cudaGetDeviceCount: cudaErrorNoDevice: no CUDA-capable device is detected".
std::string DescribeCuda0() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // consume the error: it is reported here, not at the next launch
    return std::string("cuda:0 unusable: cudaGetDeviceCount: ") + cudaGetErrorName(error) + ": " +
           cudaGetErrorString(error);
  }
  if (count == 0) return "cuda:0 unusable: cudaGetDeviceCount found 0 devices";
  cudaDeviceProp properties{};
  error = cudaGetDeviceProperties(&properties, 0);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return std::string("cuda:0 unusable: cudaGetDeviceProperties: ") + cudaGetErrorName(error) +
           ": " + cudaGetErrorString(error);
  }
  return std::string("cuda:0 is ") + properties.name + " (" + std::to_string(count) +
         (count == 1 ? " device)" : " devices)");
}

// Turns a finished test's skip into a failure. OnTestEnd runs while the test is still the
// current one (and before the result printer's OnTestEnd: listeners hear OnTestEnd in reverse
// order), so the failure is recorded on the test and printed with it; gtest allows failures in
// any event but OnTestPartResult.
class SkipIsFailure : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& test) override {
    const ::testing::TestResult& result = *test.result();
    if (!result.Skipped()) return;
    std::string reason;
    for (int i = 0; i < result.total_part_count(); ++i) {
      const ::testing::TestPartResult& part = result.GetTestPartResult(i);
      if (part.skipped()) reason += part.message();
    }
    ADD_FAILURE() << "SPLITSPEC_REQUIRE_GPU=1: a gpu test may not skip; it skipped with \""
                  << reason << "\"; " << DescribeCuda0();
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* require = std::getenv("SPLITSPEC_REQUIRE_GPU");
  if (require != nullptr && std::string(require) == "1") {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SkipIsFailure);
  }
  return RUN_ALL_TESTS();
}
