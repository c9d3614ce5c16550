#include "tests/integration/cluster_test_util.h"

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/net/request_client.h"

namespace splitspec::testing {

std::string BinaryPath(const std::string& name) {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return absl::StrCat("bin/", name);  // no /proc: relative to the working directory
  return (exe.parent_path().parent_path() / "bin" / name).string();
}

absl::StatusOr<std::pair<ChildProcess, std::string>> StartCoordinator(
    const std::string& dir, const std::vector<std::string>& extra_flags) {
  const std::string endpoint_file = dir + "/coordinator.endpoint";
  std::vector<std::string> argv = {BinaryPath("splitspec-coordinator"), "--control",
                                   "tcp://127.0.0.1:*", "--endpoint-file", endpoint_file};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::StatusOr<ChildProcess> process = ChildProcess::Spawn(argv, dir + "/coordinator.log");
  if (!process.ok()) return process.status();
  for (int i = 0; i < 1000; ++i) {
    std::string endpoint(absl::StripAsciiWhitespace(ReadFileOrEmpty(endpoint_file)));
    if (!endpoint.empty()) return std::make_pair(*std::move(process), endpoint);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("coordinator never wrote ", endpoint_file, "; log:\n", process->ReadLog()));
}

absl::StatusOr<proto::StatusReply> FetchStatus(const std::string& endpoint) {
  return net::FetchCoordinatorStatus(endpoint, absl::Seconds(5));
}

bool PollStatusUntil(const std::string& endpoint,
                     const std::function<bool(const proto::StatusReply&)>& done, int attempts,
                     absl::Duration pause, proto::StatusReply* last) {
  for (int i = 0; i < attempts; ++i) {
    absl::StatusOr<proto::StatusReply> status = FetchStatus(endpoint);
    if (status.ok()) {
      *last = *status;
      if (done(*status)) return true;
    }
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(pause));
  }
  return false;
}

}  // namespace splitspec::testing
