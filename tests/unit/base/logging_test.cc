#include "runtime/base/logging.h"

#include <unistd.h>

#include <chrono>
#include <string>

#include "gtest/gtest.h"

namespace splitspec {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

TEST(LogLinePrefixTest, MillisecondsAreZeroPaddedToThreeDigits) {
  // 1970-01-01 01:02:03.006 UTC: 6 ms must read ".006", not ".6" (log stamps
  // are parsed as times when a decision log is read back).
  const system_clock::time_point when{milliseconds(3723006)};
  const std::string prefix = LogLinePrefix(LogLevel::kDebug, when, "/a/b/draft_engine.cc", 179);
  EXPECT_EQ(prefix, "D 01:02:03.006 " + std::to_string(getpid()) + " draft_engine.cc:179] ");
}

TEST(LogLinePrefixTest, ShowsLevelLetterAndFileWithoutDirectory) {
  const system_clock::time_point when{milliseconds(45296789)};
  EXPECT_EQ(LogLinePrefix(LogLevel::kWarning, when, "x.cc", 7),
            "W 12:34:56.789 " + std::to_string(getpid()) + " x.cc:7] ");
}

// SPLITSPEC_LOG_LEVEL=debug asked for DEBUG and silently got INFO.
TEST(ParseLogLevelTest, NamesAreReadInAnyCase) {
  EXPECT_EQ(ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(ParseLogLevel("Warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("error"), LogLevel::kError);
  EXPECT_EQ(ParseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel("verbose"), LogLevel::kInfo);
  EXPECT_EQ(ParseLogLevel(nullptr), LogLevel::kInfo);
}

}  // namespace
}  // namespace splitspec
