// The KV-cache accounting: a cache's bytes per position and reserved positions
// (the doubling growth), the budget's sum over tracked caches, and the start-up
// choice of the budget (flag bytes, a percentage, the default) from
// /proc/meminfo-format files and a fake device probe.
#include "runtime/model/kv_budget.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::model {
namespace {

using ::testing::HasSubstr;

class FakeProbe final : public DeviceProbe {
 public:
  explicit FakeProbe(uint64_t free_bytes) : free_(free_bytes) {}
  bool cuda_built() const override { return true; }
  int CudaDeviceCount() const override { return 1; }
  absl::StatusOr<DeviceMemoryInfo> QueryCuda(int ordinal) const override {
    return DeviceMemoryInfo{"Fake GPU", free_, 2 * free_};
  }

 private:
  uint64_t free_;
};

std::string WriteMeminfo(const std::string& body) {
  const std::string path = ::testing::TempDir() + "/meminfo-" + std::to_string(getpid());
  std::ofstream(path) << body;
  return path;
}

TEST(KvCacheAccountingTest, BytesPerPositionComeFromTheStorage) {
  KvCache cache(/*n_layers=*/3, /*kv_dim=*/8, /*max_tokens=*/1000);
  // half-precision storage: 3 layers x (K, V) x 8 values x 2 bytes.
  EXPECT_EQ(cache.bytes_per_position(), 3u * 2 * 8 * sizeof(uint16_t));
  EXPECT_EQ(cache.memory_bytes(), 0u);
  ASSERT_TRUE(cache.Reserve(10).ok());
  EXPECT_EQ(cache.reserved_positions(), 64) << "at least 64 positions";
  EXPECT_EQ(cache.memory_bytes(), 64 * cache.bytes_per_position());
}

TEST(KvCacheAccountingTest, ReservedAfterPredictsTheDoublingGrowthExactly) {
  KvCache cache(1, 4, 300);
  for (int length : {1, 64, 65, 100, 129, 200, 257, 300}) {
    const int predicted = cache.ReservedAfter(length);
    const uint64_t predicted_bytes = cache.BytesAfterReserve(length);
    ASSERT_TRUE(cache.Reserve(length).ok());
    EXPECT_EQ(cache.reserved_positions(), predicted) << "Reserve(" << length << ")";
    EXPECT_EQ(cache.memory_bytes(), predicted_bytes);
  }
  // 64 -> 128 (doubling) -> 256 -> capped at max_tokens 300.
  EXPECT_EQ(cache.reserved_positions(), 300);
  ASSERT_TRUE(cache.Truncate(0).ok());
  EXPECT_EQ(cache.reserved_positions(), 300) << "truncation keeps the memory";
  EXPECT_EQ(cache.ReservedAfter(5), 300);
}

TEST(KvBudgetTest, SumsWhatTheTrackedCachesHoldAndAllowsUpToTheBudget) {
  KvCache a(1, 4, 1000), b(1, 4, 1000), untracked(1, 4, 1000);
  const uint64_t per_position = a.bytes_per_position();
  KvBudget budget(200 * per_position);
  budget.Track(&a);
  budget.Track(&b);
  ASSERT_TRUE(a.Reserve(100).ok());
  ASSERT_TRUE(b.Reserve(10).ok());
  ASSERT_TRUE(untracked.Reserve(500).ok());
  // The host cache stores whole blocks of 64 positions: a's 100 take 128.
  EXPECT_EQ(budget.used_bytes(), (128 + 64) * per_position);
  EXPECT_EQ(budget.free_bytes(), (200 - 192) * per_position);
  EXPECT_TRUE(budget.Allows(200 * per_position));
  EXPECT_FALSE(budget.Allows(200 * per_position + 1));
  // Growing a to 101 positions doubles it to 200 (256 stored): 8 positions free are not enough.
  EXPECT_FALSE(budget.Allows(budget.used_bytes() + a.BytesAfterReserve(101) - a.memory_bytes()));
  budget.ObserveUsed();
  budget.Untrack(&a);
  EXPECT_EQ(budget.used_bytes(), 64 * per_position);
  EXPECT_EQ(budget.counters().peak_used_bytes, 192 * per_position);
  EXPECT_TRUE(KvBudget().unlimited());
  EXPECT_TRUE(KvBudget().Allows(uint64_t{1} << 62));
}

TEST(KvBudgetPlanTest, BytesFromTheFlagNeedNoMemoryQuery) {
  absl::StatusOr<KvBudgetPlan> plan = PlanKvBudget(MemoryAmount{.bytes = 4 << 20}, DeviceSpec{}, 0,
                                                   FakeProbe(0), "/nonexistent/meminfo");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->budget_bytes, 4u << 20);
  EXPECT_THAT(DescribeKvBudget(*plan, 1024, 2048),
              HasSubstr("KV cache budget 4.00 MiB (--kv-cache-memory) = 4096 positions of 1024 "
                        "bytes: 2 sequence(s) x the full context of 2048"));
}

TEST(KvBudgetPlanTest, TheHostDefaultIsHalfOfMemAvailableLessTheWeights) {
  const std::string meminfo = WriteMeminfo(
      "MemTotal:       24000000 kB\nMemFree:         1000000 kB\n"
      "MemAvailable:    2097152 kB\nBuffers:           1000 kB\n");
  EXPECT_EQ(*ReadMemAvailable(meminfo), 2ull << 30);
  absl::StatusOr<KvBudgetPlan> plan = PlanKvBudget(
      std::nullopt, DeviceSpec{}, /*host_weight_bytes=*/1ull << 30, FakeProbe(0), meminfo);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->available_bytes, 1ull << 30);
  EXPECT_EQ(plan->budget_bytes, 512ull << 20);
  EXPECT_THAT(DescribeKvBudget(*plan, 0, 0),
              HasSubstr("(default: 50% of 1.00 GiB of host memory left after the weights)"));
  absl::StatusOr<KvBudgetPlan> quarter =
      PlanKvBudget(MemoryAmount{.percent = 25}, DeviceSpec{}, 1ull << 30, FakeProbe(0), meminfo);
  ASSERT_TRUE(quarter.ok());
  EXPECT_EQ(quarter->budget_bytes, 256ull << 20);
}

TEST(KvBudgetPlanTest, ACudaRankTakesItsShareOfTheDevicesFreeMemory) {
  absl::StatusOr<KvBudgetPlan> plan =
      PlanKvBudget(std::nullopt, DeviceSpec{DeviceSpec::Kind::kCuda, 0}, 1ull << 30,
                   FakeProbe(10ull << 30), "/nonexistent/meminfo");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->available_bytes, 10ull << 30) << "host weights do not count on a device";
  EXPECT_EQ(plan->budget_bytes, 8ull << 30);
  EXPECT_THAT(plan->memory, HasSubstr("cuda:0 (Fake GPU)"));
}

TEST(KvBudgetPlanTest, UnreadableOrEmptyMemoryIsAnErrorNamingIt) {
  absl::StatusOr<KvBudgetPlan> missing =
      PlanKvBudget(std::nullopt, DeviceSpec{}, 0, FakeProbe(0), "/nonexistent/meminfo");
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/meminfo"));
  const std::string meminfo = WriteMeminfo("MemAvailable:    1024 kB\n");
  absl::StatusOr<KvBudgetPlan> none =
      PlanKvBudget(std::nullopt, DeviceSpec{}, 1ull << 30, FakeProbe(0), meminfo);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("is 0 bytes"));
}

}  // namespace
}  // namespace splitspec::model
