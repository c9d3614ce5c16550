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

// q8_0: each row quantized by kernels::QuantizeRowQ8_0 (ggml's rule) into
// attention_q8.h's layout; KeyAt / ValueAt give the dequantized values; growth keeps
// rows; the bytes follow the 34-byte blocks of 32 values.
TEST(KvCacheTest, Q8_0StoresQuantizedRowsInTheKernelLayout) {
  constexpr int kKvDim = 64;
  KvCache cache(2, kKvDim, 300, KvCacheType::kQ8_0);
  EXPECT_EQ(cache.type(), KvCacheType::kQ8_0);
  ASSERT_TRUE(cache.Reserve(70).ok());
  std::vector<float> key(kKvDim), value(kKvDim);
  for (int c = 0; c < kKvDim; ++c) {
    key[c] = 0.37f * static_cast<float>(c - 20);
    value[c] = -0.05f * static_cast<float>(c * c % 17) + 0.01f;
  }
  cache.WriteRow(1, 67, key.data(), value.data());  // block 1, column 3
  ASSERT_TRUE(cache.Reserve(260).ok());            // grows: rows are kept
  int8_t kq[kKvDim], vq[kKvDim];
  uint16_t kd[2], vd[2];
  kernels::QuantizeRowQ8_0(key.data(), kKvDim, kq, kd);
  kernels::QuantizeRowQ8_0(value.data(), kKvDim, vq, vd);
  for (int c = 0; c < kKvDim; ++c) {
    EXPECT_EQ(cache.KeyAt(1, 67, c), kernels::Fp16ToFloat(kd[c / 32]) * kq[c]) << c;
    EXPECT_EQ(cache.ValueAt(1, 67, c), kernels::Fp16ToFloat(vd[c / 32]) * vq[c]) << c;
  }
  // The second head (offset 32) of block 1: position 3 is column 3.
  const kernels::KvBlockQ8Rows rows = cache.q8_block(1, 1, 32);
  for (int d = 0; d < 32; ++d) EXPECT_EQ(rows.kq[(d / 4) * 256 + 3 * 4 + d % 4], kq[32 + d]) << d;
  EXPECT_EQ(rows.kd[3], kd[1]);
  EXPECT_EQ(rows.vq[3 * rows.vq_stride + 5], vq[37]);
  EXPECT_EQ(rows.vd[3 * rows.vd_stride], vd[1]);
  // 2 layers x (K, V) x 2 blocks x (32 quants + a half scale).
  EXPECT_EQ(cache.bytes_per_position(), 2u * 2 * 2 * 34);
  EXPECT_EQ(cache.memory_bytes(), 320u * 2 * 2 * 2 * 34);
  EXPECT_EQ(cache.bytes_per_position() * 64, KvCache(2, kKvDim, 300).bytes_per_position() * 34);
  // KeepPath moves a q8_0 row like an f16 one.
  cache.Commit(70);
  const int32_t nodes[] = {0, 2};
  ASSERT_TRUE(cache.KeepPath(65, nodes).ok());
  EXPECT_EQ(cache.length(), 67);
  for (int c = 0; c < kKvDim; ++c) EXPECT_EQ(cache.KeyAt(1, 66, c), cache.KeyAt(1, 67, c)) << c;
  for (int c = 0; c < kKvDim; ++c) EXPECT_EQ(cache.ValueAt(1, 66, c), cache.ValueAt(1, 67, c)) << c;
}

TEST(KvCacheTest, ParseKvCacheTypeNamesTheFlagOnError) {
  EXPECT_EQ(ParseKvCacheType("f16").value(), KvCacheType::kF16);
  EXPECT_EQ(ParseKvCacheType("q8_0").value(), KvCacheType::kQ8_0);
  EXPECT_STREQ(KvCacheTypeName(KvCacheType::kQ8_0), "q8_0");
  const absl::Status bad = ParseKvCacheType("q4_0").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("--kv-cache-type 'q4_0': not f16 or q8_0"));
}

}  // namespace
}  // namespace splitspec::model
