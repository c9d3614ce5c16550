// Subprocess: a child process started with posix_spawn, or fork + exec for one
// that must die with its parent (the one place that starts processes), its
// stdout and stderr sent to a log file, killed (SIGKILL) on destruction if
// still running, unless it was started detached.
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

// What Spawn does with an existing log file: start it afresh, or keep what an
// earlier run of the process wrote there (a supervisor restarting it).
enum class LogMode { kTruncate, kAppend };

// What becomes of a child when its parent dies, even by SIGKILL: it keeps running
// (reparented), or the kernel SIGKILLs it (PR_SET_PDEATHSIG, set in the child
// between fork and exec; a parent that died before that is caught by re-checking
// getppid()). Linux ties the death signal to the spawning *thread*: spawn such
// children from a thread that lives as long as they should.
enum class OnParentDeath { kKeepRunning, kDie };

class Subprocess {
 public:
  // argv[0] is the path of the binary. The child inherits this process's
  // environment, with `extra_env` ("NAME=VALUE" entries) replacing or adding
  // variables. Errors: Internal naming argv[0] if the spawn fails (missing
  // binary, no permission).
  static absl::StatusOr<Subprocess> Spawn(const std::vector<std::string>& argv,
                                          const std::string& log_path,
                                          const std::vector<std::string>& extra_env = {},
                                          LogMode log_mode = LogMode::kTruncate,
                                          OnParentDeath on_parent_death =
                                              OnParentDeath::kKeepRunning);

  // Like Spawn, but the child runs in a new session (setsid: Ctrl-C on this
  // terminal does not reach it) with stdin from /dev/null, and outlives this
  // object: the destructor leaves it running (Wait and Kill still work).
  static absl::StatusOr<Subprocess> SpawnDetached(const std::vector<std::string>& argv,
                                                  const std::string& log_path);

  Subprocess(Subprocess&& other) noexcept
      : pid_(other.pid_), log_path_(std::move(other.log_path_)), detached_(other.detached_) {
    other.pid_ = -1;
  }
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();

  // Sends `signal` (SIGKILL by default) and reaps the process.
  void Kill(int signal = 9);
  // Sends `signal` and returns; the process is still this object's to reap.
  void Signal(int signal) const;
  // Waits up to `timeout` for exit: the exit code (128 + signal if killed), or
  // DeadlineExceeded if still running.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string ReadLog() const;

 private:
  Subprocess(pid_t pid, std::string log_path, bool detached)
      : pid_(pid), log_path_(std::move(log_path)), detached_(detached) {}
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& log_path,
                                          const std::vector<std::string>& extra_env, bool detached,
                                          LogMode log_mode, OnParentDeath on_parent_death);
  pid_t pid_;
  std::string log_path_;
  bool detached_;
};

// Reads the whole file; empty if it does not exist.
std::string ReadFileOrEmpty(const std::string& path);

// The last `lines` lines of `text` (all of it when it has fewer), for error
// messages that quote a process's log.
std::string LastLines(const std::string& text, int lines);

// How a process ended, from Subprocess::Wait's code: "exited with status 3",
// "was killed by signal 9 (Killed)".
std::string DescribeExit(int code);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_SUBPROCESS_H_
