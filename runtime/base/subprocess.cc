#include "runtime/base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace splitspec {

namespace {

// environ with `extra_env` ("NAME=VALUE") replacing or adding variables. The
// pointers stay valid while `extra_env` and environ are unchanged.
std::vector<char*> MergedEnvironment(const std::vector<std::string>& extra_env) {
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const absl::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& extra : extra_env)
      replaced |= absl::StartsWith(extra, absl::StrCat(name, "="));
    if (!replaced) env.push_back(*e);
  }
  for (const std::string& extra : extra_env) env.push_back(const_cast<char*>(extra.c_str()));
  env.push_back(nullptr);
  return env;
}

// fork + exec of a child that the kernel SIGKILLs when this thread dies (posix_spawn
// cannot set PR_SET_PDEATHSIG in the child). Between fork and exec the child makes only
// async-signal-safe calls; a failure before exec reaches the parent as an errno over a
// close-on-exec pipe (nothing read: exec succeeded). Returns the pid or that errno.
absl::StatusOr<pid_t> ForkExecDyingWithParent(const char* path, char* const* argv,
                                              char* const* envp, const char* log_path,
                                              int log_flags) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat("cannot start ", path, ": pipe2: ", errno));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    close(report[0]);
    close(report[1]);
    return absl::InternalError(absl::StrCat("cannot start ", path, ": ", std::strerror(error)));
  }
  if (pid == 0) {
    close(report[0]);
    int error = 0;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) error = errno;
    // The parent may have died between fork and prctl: then no signal will come.
    if (error == 0 && getppid() != parent) _exit(127);
    const int log = error == 0 ? open(log_path, O_WRONLY | O_CREAT | log_flags, 0644) : -1;
    if (error == 0 && log < 0) error = errno;
    if (error == 0 && (dup2(log, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0))
      error = errno;
    if (error == 0) {
      if (log > STDERR_FILENO) close(log);
      execve(path, argv, envp);
      error = errno;
    }
    ssize_t ignored = write(report[1], &error, sizeof(error));
    (void)ignored;
    _exit(127);
  }
  close(report[1]);
  int error = 0;
  ssize_t got = 0;
  do {
    got = read(report[0], &error, sizeof(error));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(error))) {
    ::waitpid(pid, nullptr, 0);
    return absl::InternalError(absl::StrCat("cannot start ", path, ": ", std::strerror(error)));
  }
  return pid;
}

}  // namespace

absl::StatusOr<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv,
                                             const std::string& log_path,
                                             const std::vector<std::string>& extra_env,
                                             LogMode log_mode,
                                             OnParentDeath on_parent_death) {
  return Start(argv, log_path, extra_env, /*detached=*/false, log_mode, on_parent_death);
}

absl::StatusOr<Subprocess> Subprocess::SpawnDetached(const std::vector<std::string>& argv,
                                                     const std::string& log_path) {
  return Start(argv, log_path, {}, /*detached=*/true, LogMode::kTruncate,
               OnParentDeath::kKeepRunning);
}

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const std::string& log_path,
                                             const std::vector<std::string>& extra_env,
                                             bool detached, LogMode log_mode,
                                             OnParentDeath on_parent_death) {
  if (argv.empty()) return absl::InvalidArgumentError("Subprocess: empty argv");
  const int mode = log_mode == LogMode::kAppend ? O_APPEND : O_TRUNC;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env = MergedEnvironment(extra_env);
  if (on_parent_death == OnParentDeath::kDie && !detached) {
    absl::StatusOr<pid_t> pid =
        ForkExecDyingWithParent(argv[0].c_str(), args.data(), env.data(), log_path.c_str(), mode);
    if (!pid.ok()) return pid.status();
    return Subprocess(*pid, log_path, /*detached=*/false);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (detached) {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
  }
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | mode, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attributes, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0)
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", std::strerror(rc)));
  return Subprocess(pid, log_path, detached);
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !detached_) Kill();
}

void Subprocess::Signal(int signal) const {
  if (pid_ > 0) ::kill(pid_, signal);
}

void Subprocess::Kill(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (absl::Now() > deadline) return absl::DeadlineExceededError("child still running");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::FailedPreconditionError("no child process");
}

std::string Subprocess::ReadLog() const { return ReadFileOrEmpty(log_path_); }

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string LastLines(const std::string& text, int lines) {
  size_t start = text.size();
  // A final newline ends the last line; it does not start an empty one.
  size_t end = !text.empty() && text.back() == '\n' ? text.size() - 1 : text.size();
  for (int seen = 0; seen < lines && end > 0; ++seen) {
    const size_t newline = text.rfind('\n', end - 1);
    start = newline == std::string::npos ? 0 : newline + 1;
    if (newline == std::string::npos) break;
    end = newline;
  }
  return text.substr(std::min(start, text.size()));
}

std::string DescribeExit(int code) {
  if (code > 128 && code < 128 + 65) {
    const char* name = strsignal(code - 128);
    return absl::StrCat("was killed by signal ", code - 128, " (", name != nullptr ? name : "?",
                        ")");
  }
  return absl::StrCat("exited with status ", code);
}

}  // namespace splitspec
