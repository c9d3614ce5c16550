// Minimal leveled logging to stderr, and CHECK for programmer errors.
//
//   SPLITSPEC_LOG(INFO) << "worker " << id << " registered";
//   SPLITSPEC_CHECK(n > 0) << "n=" << n;   // aborts: programmer errors only
//
// The level is read once from the environment variable SPLITSPEC_LOG_LEVEL
// (DEBUG, INFO, WARNING, ERROR, in any case; default INFO). Thread-safe: each message is
// formatted into a buffer and written with one call.
#ifndef SPLITSPEC_RUNTIME_BASE_LOGGING_H_
#define SPLITSPEC_RUNTIME_BASE_LOGGING_H_

#include <chrono>
#include <sstream>
#include <string>

namespace splitspec {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// True if messages of `level` are printed.
bool LogEnabled(LogLevel level);

// The level a SPLITSPEC_LOG_LEVEL value names, in any case ("debug" is DEBUG);
// INFO for null or any other value.
LogLevel ParseLogLevel(const char* name);

// Sets the lowest level printed, unless SPLITSPEC_LOG_LEVEL is set in the
// environment (the user's choice wins). Tools that run services in-process
// use it to keep their output clean. Thread-safe.
void SetDefaultLogLevel(LogLevel level);

// The prefix of a log line: "I 21:13:36.006 PID file.cc:42] " (UTC, milliseconds
// zero-padded so the stamps sort and parse as times).
std::string LogLinePrefix(LogLevel level, std::chrono::system_clock::time_point when,
                          const char* file, int line);

// Formats one log line; writes it (and aborts for kFatal) on destruction.
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows the stream expression when a level is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace splitspec

#define SPLITSPEC_LOG_LEVEL_DEBUG ::splitspec::LogLevel::kDebug
#define SPLITSPEC_LOG_LEVEL_INFO ::splitspec::LogLevel::kInfo
#define SPLITSPEC_LOG_LEVEL_WARNING ::splitspec::LogLevel::kWarning
#define SPLITSPEC_LOG_LEVEL_ERROR ::splitspec::LogLevel::kError

#define SPLITSPEC_LOG(level)                            \
  !::splitspec::LogEnabled(SPLITSPEC_LOG_LEVEL_##level) \
      ? (void)0                                         \
      : ::splitspec::LogVoidify() &                     \
            ::splitspec::LogMessage(SPLITSPEC_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

#define SPLITSPEC_CHECK(cond)                                                                      \
  (cond) ? (void)0                                                                                 \
         : ::splitspec::LogVoidify() &                                                             \
               ::splitspec::LogMessage(::splitspec::LogLevel::kFatal, __FILE__, __LINE__).stream() \
                   << "CHECK failed: " #cond " "

#endif  // SPLITSPEC_RUNTIME_BASE_LOGGING_H_
