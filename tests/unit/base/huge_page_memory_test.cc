#include "runtime/base/huge_page_memory.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace splitspec {
namespace {

uintptr_t Address(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

TEST(HugePageMemoryTest, AlignsLargeAllocationsToHugePagesAndSmallOnesToCacheLines) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, kHugePageBytes - 1}) {
    void* p = AllocateHugePageAligned(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(Address(p) % kCacheLineBytes, 0u) << bytes;
    FreeHugePageAligned(p, bytes);
  }
  for (size_t bytes : {kHugePageBytes, kHugePageBytes + 1, 5 * kHugePageBytes + 12345}) {
    void* p = AllocateHugePageAligned(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(Address(p) % kHugePageBytes, 0u) << bytes;
    FreeHugePageAligned(p, bytes);
  }
}

TEST(HugePageMemoryTest, MemoryIsZeroedAndKeepsWhatIsWritten) {
  for (size_t bytes : {size_t{100}, 3 * kHugePageBytes + 7}) {
    auto* p = static_cast<uint8_t*>(AllocateHugePageAligned(bytes));
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << "byte " << i << " of " << bytes;
    for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(i * 31 + 7);
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(p[i], static_cast<uint8_t>(i * 31 + 7)) << "byte " << i << " of " << bytes;
    }
    FreeHugePageAligned(p, bytes);
  }
}

#if defined(__linux__)
// The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled ("always",
// "madvise", "never"), or "" when the file is absent.
std::string TransparentHugePageMode() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(file, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

// The AnonHugePages kB of the /proc/self/smaps mapping holding `pointer`; -1 if none
// holds it.
int64_t AnonHugePagesKbAt(const void* pointer) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    // A mapping's header starts "start-end perms ..." in hex; its fields "Name:  value".
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    uint64_t start = 0, end = 0;
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        absl::SimpleHexAtoi(line.substr(0, dash), &start) &&
        absl::SimpleHexAtoi(line.substr(dash + 1, space - dash - 1), &end)) {
      inside = start <= Address(pointer) && Address(pointer) < end;
      continue;
    }
    absl::string_view field = line;
    if (inside && absl::ConsumePrefix(&field, "AnonHugePages:")) {
      absl::string_view kb = absl::StripSuffix(absl::StripAsciiWhitespace(field), "kB");
      int64_t value = -1;
      return absl::SimpleAtoi(absl::StripAsciiWhitespace(kb), &value) ? value : -1;
    }
  }
  return -1;
}

TEST(HugePageMemoryTest, LargeBufferIsBackedByTransparentHugePages) {
  const std::string mode = TransparentHugePageMode();
  if (mode != "always" && mode != "madvise") {
    GTEST_SKIP() << "transparent huge pages are '" << mode
                 << "' in /sys/kernel/mm/transparent_hugepage/enabled (not always or "
                    "madvise): the kernel gives small pages whatever we ask";
  }
  const size_t bytes = 8 * kHugePageBytes;
  auto* p = static_cast<uint8_t*>(AllocateHugePageAligned(bytes));
  std::memset(p, 1, bytes);  // the faults that take the pages
  const int64_t kb = AnonHugePagesKbAt(p);
  FreeHugePageAligned(p, bytes);
  ASSERT_GE(kb, 0) << "no /proc/self/smaps mapping with AnonHugePages holds the buffer";
  // The kernel may fall back to small pages for a 2 MiB range it cannot find free
  // memory for; at least one of the eight must be huge.
  EXPECT_GE(kb, static_cast<int64_t>(kHugePageBytes / 1024)) << "THP mode " << mode;
}
#endif  // __linux__

}  // namespace
}  // namespace splitspec
