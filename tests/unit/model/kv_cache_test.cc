#include "runtime/model/kv_cache.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::model {
namespace {

using ::testing::HasSubstr;

TEST(KvCacheTest, TruncateRestoresLength) {
  KvCache cache(2, 8, 100);
  ASSERT_TRUE(cache.Reserve(10).ok());
  cache.key(1, 9)[7] = 3.5f;
  cache.Commit(10);
  ASSERT_TRUE(cache.Truncate(4).ok());
  EXPECT_EQ(cache.length(), 4);
  ASSERT_TRUE(cache.Truncate(4).ok());
  EXPECT_EQ(cache.length(), 4);
  cache.Clear();
  EXPECT_EQ(cache.length(), 0);
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
  cache.value(1, 1)[3] = 7.f;
  ASSERT_TRUE(cache.Reserve(150).ok());  // grows: rows are kept
  EXPECT_EQ(cache.value(1, 1)[3], 7.f);
  EXPECT_EQ(cache.memory_bytes(), 150u * 4 * 4 * 2 * 2);
  absl::Status s = cache.Reserve(201);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr("201 tokens exceeds the KV cache limit of 200"));
  EXPECT_EQ(cache.length(), 0);
}

}  // namespace
}  // namespace splitspec::model
