#include "runtime/model/kv_cache.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::model {
namespace {

using ::testing::HasSubstr;

TEST(KvCacheTest, TruncateRestoresLength) {
  KvCache cache(2, 8, 100);
  ASSERT_TRUE(cache.Reserve(10).ok());
  std::vector<float> row(8, 3.5f);
  cache.WriteRow(1, 9, row.data(), row.data());
  cache.Commit(10);
  ASSERT_TRUE(cache.Truncate(4).ok());
  EXPECT_EQ(cache.length(), 4);
  ASSERT_TRUE(cache.Truncate(4).ok());
  EXPECT_EQ(cache.length(), 4);
  cache.Clear();
  EXPECT_EQ(cache.length(), 0);
}

// Keys go to the attention kernels' transposed blocks, values row by row
// (kernels/cpu/attention.h), rounded to half precision.
TEST(KvCacheTest, WriteRowStoresHalvesInTheKernelLayout) {
  KvCache cache(1, 3, 200);
  ASSERT_TRUE(cache.Reserve(130).ok());
  const std::vector<float> key = {1.f, -2.5f, 1.0f / 3}, value = {0.5f, 65504.f, 1e-3f};
  cache.WriteRow(0, 129, key.data(), value.data());  // block 2, column 1
  const uint16_t* block = cache.key_block(0, 2);
  EXPECT_EQ(block[0 * kernels::kKvBlockPositions + 1], kernels::FloatToFp16(1.f));
  EXPECT_EQ(block[1 * kernels::kKvBlockPositions + 1], kernels::FloatToFp16(-2.5f));
  EXPECT_EQ(block[2 * kernels::kKvBlockPositions + 1], kernels::FloatToFp16(1.0f / 3));
  EXPECT_EQ(cache.value_row(0, 129)[1], kernels::FloatToFp16(65504.f));
  EXPECT_EQ(cache.KeyAt(0, 129, 2), kernels::RoundToHalf(1.0f / 3));
  EXPECT_EQ(cache.ValueAt(0, 129, 2), kernels::RoundToHalf(1e-3f));
}

TEST(KvCacheTest, TruncateBeyondLengthIsRefusedAndChangesNothing) {
  KvCache cache(1, 4, 10);
  ASSERT_TRUE(cache.Reserve(3).ok());
  cache.Commit(3);
  absl::Status s = cache.Truncate(5);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("truncate to 5 outside [0, 3]"));
  EXPECT_FALSE(cache.Truncate(-1).ok());
  EXPECT_EQ(cache.length(), 3);
}

TEST(KvCacheTest, ReserveKeepsRowsAndRespectsLimit) {
  KvCache cache(2, 4, 200);
  ASSERT_TRUE(cache.Reserve(2).ok());
  const std::vector<float> key = {1.f, 2.f, 3.f, 4.f}, value = {5.f, 6.f, 7.f, 8.f};
  cache.WriteRow(1, 1, key.data(), value.data());
  ASSERT_TRUE(cache.Reserve(150).ok());  // grows: rows are kept
  EXPECT_EQ(cache.KeyAt(1, 1, 2), 3.f);
  EXPECT_EQ(cache.ValueAt(1, 1, 3), 8.f);
  // 150 positions stored as 3 blocks of 64, halves: 192 * kv_dim 4 * 2 bytes * (K, V) * 2 layers.
  EXPECT_EQ(cache.memory_bytes(), 192u * 4 * 2 * 2 * 2);
  EXPECT_EQ(cache.bytes_per_position(), 4u * 2 * 2 * 2);
  absl::Status s = cache.Reserve(201);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr("201 tokens exceeds the KV cache limit of 200"));
  EXPECT_EQ(cache.length(), 0);
}

}  // namespace
}  // namespace splitspec::model
