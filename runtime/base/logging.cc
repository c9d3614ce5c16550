#include "runtime/base/logging.h"

#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace splitspec {
namespace {

LogLevel ReadLevelFromEnv() { return ParseLogLevel(std::getenv("SPLITSPEC_LOG_LEVEL")); }

const char* LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
    case LogLevel::kFatal:
      return "F";
  }
  return "?";
}

std::atomic<int>& MinLevel() {
  static std::atomic<int> min_level{static_cast<int>(ReadLevelFromEnv())};
  return min_level;
}

}  // namespace

LogLevel ParseLogLevel(const char* name) {
  if (name == nullptr) return LogLevel::kInfo;
  if (strcasecmp(name, "DEBUG") == 0) return LogLevel::kDebug;
  if (strcasecmp(name, "WARNING") == 0) return LogLevel::kWarning;
  if (strcasecmp(name, "ERROR") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= MinLevel().load(std::memory_order_relaxed);
}

void SetDefaultLogLevel(LogLevel level) {
  if (std::getenv("SPLITSPEC_LOG_LEVEL") == nullptr) MinLevel().store(static_cast<int>(level));
}

std::string LogLinePrefix(LogLevel level, std::chrono::system_clock::time_point when,
                          const char* file, int line) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() %
      1000);
  std::tm tm_utc;
  gmtime_r(&seconds, &tm_utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm_utc);
  const char* base = std::strrchr(file, '/');
  char prefix[256];
  std::snprintf(prefix, sizeof(prefix), "%s %s.%03d %d %s:%d] ", LevelLetter(level), stamp,
                millis, static_cast<int>(getpid()), base ? base + 1 : file, line);
  return prefix;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  stream_ << LogLinePrefix(level, std::chrono::system_clock::now(), file, line);
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  // One write per message keeps lines from different threads whole.
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace splitspec
