// `splitspec serve [--control ENDPOINT] [--model PATH] [--drafter NAME] [--draft PATH]
//                  [--drafts N] [--targets N] [--threads N] [--log-dir DIR]
//                  [--http HOST:PORT | --http none]`
//
// Starts a local cluster as separate processes on loopback: one coordinator,
// N target workers and M draft workers (binaries next to this one), waits until
// every worker has registered, prints the membership, and keeps running until
// Ctrl-C / SIGTERM (then stops the workers before the coordinator) or until a
// process exits on its own (reported, and the rest stopped). Defaults need no
// arguments after deploy/setup.sh: the default model from models/, drafter ngram,
// the coordinator's OpenAI-compatible HTTP API on 127.0.0.1:8000.
// --config FILE is not implemented yet and is refused.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/subprocess.h"
#include "runtime/net/request_client.h"
#include "tools/cli_args.h"
#include "tools/commands.h"
#include "tools/default_paths.h"

namespace splitspec::tools {
namespace {

struct ServeFlags {
  std::string control = "tcp://127.0.0.1:5555";
  std::string model;
  std::string drafter = "ngram";
  std::string draft;
  int drafts = 1;
  int targets = 1;
  int threads = 0;
  std::string log_dir;
  std::string http = "127.0.0.1:8000";  // the coordinator's OpenAI-compatible front door; "none": off
};

absl::StatusOr<ServeFlags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, {"control", "model", "drafter", "draft", "drafts", "targets",
                                                       "threads", "log-dir", "config", "http"}));
  if (args.Has("config")) {
    return absl::UnimplementedError("--config FILE is not implemented yet; use the flags (see splitspec serve --help)");
  }
  ServeFlags f;
  f.control = args.GetString("control", f.control);
  f.http = args.GetString("http", f.http);
  f.model = args.GetString("model", DefaultModelPath());
  f.draft = args.GetString("draft", "");
  f.drafter = args.GetString("drafter", f.draft.empty() ? "ngram" : "model");
  f.log_dir = args.GetString("log-dir", absl::StrCat(RepositoryRoot(), "/build/cluster"));
  ASSIGN_OR_RETURN(int64_t drafts, args.GetInt("drafts", 1));
  ASSIGN_OR_RETURN(int64_t targets, args.GetInt("targets", 1));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0));
  if (drafts < 0 || drafts > 64) return absl::InvalidArgumentError(absl::StrCat("--drafts ", drafts, " out of range [0, 64]"));
  if (targets < 1 || targets > 64) return absl::InvalidArgumentError(absl::StrCat("--targets ", targets, " out of range [1, 64]"));
  f.drafts = static_cast<int>(drafts);
  f.targets = static_cast<int>(targets);
  f.threads = static_cast<int>(threads);
  if (!std::filesystem::exists(f.model)) {
    return absl::NotFoundError(absl::StrCat("model ", f.model, " not found; run deploy/setup.sh or pass --model PATH"));
  }
  return f;
}

absl::Status WaitForMembers(const std::string& control, int expected, std::vector<Subprocess>& processes) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    for (Subprocess& p : processes) {
      absl::StatusOr<int> exited = p.Wait(absl::ZeroDuration());
      if (exited.ok()) {
        return absl::UnavailableError(absl::StrCat("a process exited with ", *exited, " during startup; log ",
                                                   p.log_path(), ":\n", p.ReadLog()));
      }
    }
    absl::StatusOr<proto::StatusReply> status = net::FetchCoordinatorStatus(control, absl::Milliseconds(500));
    if (status.ok()) {
      int alive = 0;
      for (const proto::MemberStatus& m : status->members()) alive += m.state() == proto::MEMBER_STATE_ALIVE;
      if (alive >= expected) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("workers did not register with ", control, " within 60 s"));
}

absl::Status Serve(const ServeFlags& f) {
  std::filesystem::create_directories(f.log_dir);
  const std::string bin = BinaryDirectory();
  std::vector<Subprocess> processes;
  auto spawn = [&](std::vector<std::string> argv, const std::string& name) -> absl::Status {
    ASSIGN_OR_RETURN(Subprocess p, Subprocess::Spawn(argv, absl::StrCat(f.log_dir, "/", name, ".log")));
    std::printf("==> %s (pid %d, log %s/%s.log)\n", name.c_str(), p.pid(), f.log_dir.c_str(), name.c_str());
    processes.push_back(std::move(p));
    return absl::OkStatus();
  };
  const std::string threads = std::to_string(f.threads > 0 ? f.threads : std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> coordinator = {bin + "/splitspec-coordinator", "--control", f.control};
  if (f.http != "none") coordinator.insert(coordinator.end(), {"--http", f.http, "--model", f.model});
  RETURN_IF_ERROR(spawn(coordinator, "coordinator"));
  for (int i = 0; i < f.targets; ++i) {
    RETURN_IF_ERROR(spawn({bin + "/splitspec-target-worker", "--coordinator", f.control, "--name",
                           absl::StrCat("target-", i), "--model", f.model, "--threads", threads},
                          absl::StrCat("target-", i)));
  }
  for (int i = 0; i < f.drafts; ++i) {
    std::vector<std::string> argv = {bin + "/splitspec-draft-worker", "--coordinator", f.control, "--name",
                                     absl::StrCat("draft-", i), "--drafter", f.drafter, "--target-model", f.model,
                                     "--threads", "1"};
    if (!f.draft.empty()) argv.insert(argv.end(), {"--draft", f.draft});
    RETURN_IF_ERROR(spawn(argv, absl::StrCat("draft-", i)));
  }
  RETURN_IF_ERROR(WaitForMembers(f.control, f.targets + f.drafts, processes));
  std::printf("==> cluster ready on %s: %d target worker(s), %d draft worker(s) (%s); Ctrl-C stops it\n",
              f.control.c_str(), f.targets, f.drafts, f.drafter.c_str());
  if (f.http != "none") std::printf("==> OpenAI-compatible API on http://%s/v1\n", f.http.c_str());
  std::fflush(stdout);
  absl::Status outcome = absl::OkStatus();
  while (!ShutdownRequested().load() && outcome.ok()) {
    for (Subprocess& p : processes) {
      absl::StatusOr<int> exited = p.Wait(absl::ZeroDuration());
      if (exited.ok()) {
        outcome = absl::UnavailableError(absl::StrCat("process with log ", p.log_path(), " exited with ", *exited));
      }
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  // Workers first (they deregister), the coordinator last.
  for (auto it = processes.rbegin(); it != processes.rend(); ++it) {
    if (it->running()) ::kill(it->pid(), SIGTERM);
    if (it->running() && !it->Wait(absl::Seconds(5)).ok()) it->Kill();
  }
  std::printf("==> stopped\n");
  return outcome;
}

}  // namespace

int RunServeCommand(const CommandArgs& args) {
  absl::StatusOr<ServeFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec serve: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  InstallShutdownHandlers();
  absl::Status status = Serve(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec serve: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace splitspec::tools
