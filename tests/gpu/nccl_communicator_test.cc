// NcclCommunicator on real GPUs: skipped without a CUDA device; the two-rank
// collectives need two devices (NCCL refuses two ranks on one GPU).
#include "runtime/dist/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <stdlib.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/dist/file_rendezvous_store.h"

namespace splitspec::net {
namespace {

using ::testing::HasSubstr;

int DeviceCount() {
  int count = 0;
  if (!kernels::CudaDeviceAvailable() || cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::vector<float> RankData(int rank, int64_t count) {
  std::mt19937 rng(1000 + rank);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// Copies host -> device, runs `op` on the device buffers, copies back.
struct DeviceBuffer {
  explicit DeviceBuffer(int64_t count) : count(count) {
    EXPECT_EQ(cudaMalloc(&data, count * sizeof(float)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  void Upload(const std::vector<float>& v) {
    EXPECT_EQ(cudaMemcpy(data, v.data(), count * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<float> Download() const {
    std::vector<float> v(count);
    EXPECT_EQ(cudaMemcpy(v.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return v;
  }
  float* data = nullptr;
  int64_t count;
};

std::string FreshStoreDir(const std::string& name) {
  std::string pattern = absl::StrCat(::testing::TempDir(), "/nccl-", name, "-XXXXXX");
  return mkdtemp(pattern.data());
}

TEST(NcclCommunicatorTest, TwoRanksAllReduceAllGatherAndBroadcast) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices, found " << DeviceCount();
  const std::string dir = FreshStoreDir("two");
  const int64_t count = 49152;
  std::vector<std::string> failures(2);
  auto rank_body = [&](int rank) {
    auto store = FileRendezvousStore::Open(dir);
    if (!store.ok()) {
      failures[rank] = store.status().ToString();
      return;
    }
    auto comm = NcclCommunicator::Create(**store, {.group = "g", .rank = rank, .size = 2},
                                         {.device = rank});
    if (!comm.ok()) {
      failures[rank] = comm.status().ToString();
      return;
    }
    cudaSetDevice(rank);
    DeviceBuffer buf(count);
    buf.Upload(RankData(rank, count));
    absl::Status s = (*comm)->AllReduceSum(buf.data, count);
    if (!s.ok()) {
      failures[rank] = s.ToString();
      return;
    }
    const std::vector<float> got = buf.Download();
    const std::vector<float> a = RankData(0, count), b = RankData(1, count);
    for (int64_t i = 0; i < count; ++i) {
      if (got[i] != a[i] + b[i]) {
        failures[rank] = absl::StrCat("sum differs at ", i);
        return;
      }
    }
    DeviceBuffer in(count), out(2 * count);
    in.Upload(RankData(rank, count));
    s = (*comm)->AllGather(in.data, count, out.data);
    if (!s.ok()) {
      failures[rank] = s.ToString();
      return;
    }
    std::vector<float> gathered = out.Download();
    std::vector<float> want = a;
    want.insert(want.end(), b.begin(), b.end());
    if (gathered != want) {
      failures[rank] = "all_gather differs";
      return;
    }
    buf.Upload(RankData(rank, count));
    s = (*comm)->BroadcastFloats(buf.data, count, /*root=*/1);
    if (!s.ok()) {
      failures[rank] = s.ToString();
      return;
    }
    if (buf.Download() != b) failures[rank] = "broadcast differs from root 1";
  };
  std::thread t0(rank_body, 0), t1(rank_body, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

TEST(NcclCommunicatorTest, InitTimesOutWhenTheOtherRankNeverJoins) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  auto store = FileRendezvousStore::Open(FreshStoreDir("alone"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto comm = NcclCommunicator::Create(
      **store, {.group = "g", .rank = 0, .size = 2, .timeout = absl::Seconds(2)});
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_THAT(comm.status().message(), HasSubstr("NCCL init of group 'g' (rank 0 of 2)"));
}

TEST(NcclCommunicatorTest, AFollowerWithoutTheUniqueIdTimesOutNamingTheKey) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  auto store = FileRendezvousStore::Open(FreshStoreDir("no-id"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto comm = NcclCommunicator::Create(
      **store, {.group = "g", .rank = 1, .size = 2, .timeout = absl::Milliseconds(300)});
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_THAT(comm.status().message(), HasSubstr("'g/nccl/unique-id' not set"));
}

TEST(NcclCommunicatorTest, ASingleRankGroupCopiesNothing) {
  if (DeviceCount() < 1) GTEST_SKIP() << "no CUDA device";
  auto store = FileRendezvousStore::Open(FreshStoreDir("solo"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto comm = NcclCommunicator::Create(**store, {.group = "solo", .rank = 0, .size = 1});
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceBuffer buf(576);
  buf.Upload(RankData(0, 576));
  ASSERT_TRUE((*comm)->AllReduceSum(buf.data, 576).ok());
  EXPECT_EQ(buf.Download(), RankData(0, 576));
}

}  // namespace
}  // namespace splitspec::net
