// Subprocess: a child process started with posix_spawn, its stdout and stderr
// sent to a log file, killed (SIGKILL) on destruction if still running.
//
//   ASSIGN_OR_RETURN(Subprocess worker, Subprocess::Spawn({bin, "--name", "w"}, "/tmp/w.log"));
//   ...
//   worker.Kill(SIGTERM);   // and reap it
//
// Thread-compatible; move-only.
#ifndef SPLITSPEC_RUNTIME_BASE_SUBPROCESS_H_
#define SPLITSPEC_RUNTIME_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace splitspec {

class Subprocess {
 public:
  // argv[0] is the path of the binary. The child inherits this process's
  // environment, with `extra_env` ("NAME=VALUE" entries) replacing or adding
  // variables. Errors: Internal naming argv[0] if the spawn fails (missing
  // binary, no permission).
  static absl::StatusOr<Subprocess> Spawn(const std::vector<std::string>& argv, const std::string& log_path,
                                          const std::vector<std::string>& extra_env = {});

  Subprocess(Subprocess&& other) noexcept : pid_(other.pid_), log_path_(std::move(other.log_path_)) { other.pid_ = -1; }
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();

  // Sends `signal` (SIGKILL by default) and reaps the process.
  void Kill(int signal = 9);
  // Waits up to `timeout` for exit: the exit code (128 + signal if killed), or
  // DeadlineExceeded if still running.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string ReadLog() const;

 private:
  Subprocess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
};

// Reads the whole file; empty if it does not exist.
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_SUBPROCESS_H_
