#include "runtime/base/memory_amount.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace splitspec {
namespace {

uint64_t Bytes(const char* text) {
  absl::StatusOr<MemoryAmount> amount = ParseMemoryAmount(text);
  EXPECT_TRUE(amount.ok()) << text << ": " << amount.status();
  EXPECT_FALSE(amount.ok() && amount->is_percent()) << text;
  return amount.ok() ? amount->bytes : 0;
}

TEST(MemoryAmountTest, ReadsBytesAndBinaryUnits) {
  EXPECT_EQ(Bytes("1048576"), 1048576u);
  EXPECT_EQ(Bytes("512KiB"), 512u * 1024);
  EXPECT_EQ(Bytes("256MiB"), 256u * 1024 * 1024);
  EXPECT_EQ(Bytes("256 mib"), 256u * 1024 * 1024);
  EXPECT_EQ(Bytes("2GiB"), 2ull << 30);
  EXPECT_EQ(Bytes("2G"), 2ull << 30);
  EXPECT_EQ(Bytes("2GB"), 2ull << 30);
  EXPECT_EQ(Bytes("1.5GiB"), 3ull << 29);
  EXPECT_EQ(Bytes("1TiB"), 1ull << 40);
}

TEST(MemoryAmountTest, ReadsAPercentageAndResolvesItAgainstTheAvailableBytes) {
  absl::StatusOr<MemoryAmount> amount = ParseMemoryAmount("40%");
  ASSERT_TRUE(amount.ok()) << amount.status();
  EXPECT_TRUE(amount->is_percent());
  EXPECT_DOUBLE_EQ(amount->percent, 40.0);
  EXPECT_EQ(amount->Resolve(1000), 400u);
  EXPECT_EQ(ParseMemoryAmount("100%")->Resolve(1000), 1000u);
  EXPECT_EQ(ParseMemoryAmount("3MiB")->Resolve(1000), 3u << 20) << "bytes ignore the available";
}

TEST(MemoryAmountTest, RefusesNonsenseNamingTheText) {
  for (const char* bad : {"", "abc", "-5MiB", "0", "0%", "150%", "12 parsecs", "9999999TiB", "%"}) {
    absl::StatusOr<MemoryAmount> amount = ParseMemoryAmount(bad);
    ASSERT_FALSE(amount.ok()) << "'" << bad << "' was accepted";
    EXPECT_TRUE(absl::IsInvalidArgument(amount.status()));
    EXPECT_NE(amount.status().message().find(absl::StrCat("'", bad, "'")), std::string::npos)
        << amount.status();
  }
}

TEST(MemoryAmountTest, FormatsBytesInTheLargestUnit) {
  EXPECT_EQ(FormatBytes(512), "512 bytes");
  EXPECT_EQ(FormatBytes(256u << 20), "256.0 MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.50 GiB");
}

}  // namespace
}  // namespace splitspec
