// A child process for integration tests: spawned with posix_spawn, its output
// sent to a log file, killed (SIGKILL) on destruction if still running.
#ifndef SPLITSPEC_TESTS_INTEGRATION_CHILD_PROCESS_H_
#define SPLITSPEC_TESTS_INTEGRATION_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace splitspec::testing {

class ChildProcess {
 public:
  // argv[0] is the path of the binary. stdout and stderr go to `log_path`.
  static absl::StatusOr<ChildProcess> Spawn(const std::vector<std::string>& argv, const std::string& log_path);

  ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_), log_path_(std::move(other.log_path_)) { other.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess();

  // Sends `signal` (SIGKILL by default) and reaps the process.
  void Kill(int signal = 9);
  // Waits up to `timeout` for exit; returns the exit status or DeadlineExceeded.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  pid_t pid() const { return pid_; }
  std::string ReadLog() const;

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
};

// A fresh directory under $TMPDIR (or /tmp) for one test's files.
std::string MakeTempDir(const std::string& prefix);

// Reads the whole file; empty if it does not exist.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_CHILD_PROCESS_H_
