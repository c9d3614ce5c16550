// `splitspec scale [--coordinator EP] [--draft +N|-N] [--target-groups +N|-N]
//                  [--worker-ids ID,ID] [--roll draft|target] [--model PATH] [--drafter NAME] [--draft-model PATH]
//                  [--threads N] [--target-tp N] [--host ADDR] [--log-dir DIR]
//                  [--drain-timeout-ms N] [--wait-s N] [--force]`
//
// Grows or shrinks the pools of a running cluster without a restart.
//   +N  starts N worker processes on this host (N target groups of --target-tp
//       processes each), detached in their own sessions (they outlive this
//       command; logs in --log-dir, default build/cluster), pointed at the
//       coordinator, and waits until every one has registered. The router
//       places new and queued requests on them at once, and a new draft worker
//       takes over requests that were decoding without one.
//   -N  asks the coordinator to drain N workers of that role (the least-loaded
//       ones, or exactly --worker-ids) and waits until they have left: a draft
//       worker's requests move to the other draft workers at once; a target
//       group's running requests finish, or are re-placed from their committed
//       tokens after the drain timeout (--drain-timeout-ms, else the
//       coordinator's, 30 s). No request is lost; the coordinator refuses to
//       drain the last target group (after which it refuses every request)
//       unless --force, and even forced, not while requests wait or run.
//   --roll ROLE  replaces every serving worker of the role (draft, or target
//       groups of --target-tp ranks): starts as many new ones, waits until they
//       have registered, then drains the old ones as -N --worker-ids would. The
//       new workers load the keys SPLITSPEC_KEYS holds now, so after
//       `splitspec keygen --rotate ROLE` this moves the cluster onto the new
//       keys within the grace period, no request lost.
// Prints one JSON object per line: each worker started / registered /
// draining / left, then {"event":"pools",...} with the final pool sizes.
// Flags for new workers mirror `splitspec serve`: --model, --drafter,
// --threads; the draft model's path is --draft-model (--draft is the count).
// With SPLITSPEC_KEYS=DIR each new worker gets a key of its own,
// DIR/draft.d/NAME or DIR/target.d/NAME (the running coordinator and targets
// re-read DIR), unless DIR cannot be written (then the role's shared key).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/json_string.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/subprocess.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/request_client.h"
#include "tools/commands.h"
#include "tools/default_paths.h"

namespace splitspec::tools {
namespace {

struct ScaleFlags {
  std::string coordinator = "tcp://127.0.0.1:5555";
  int draft_delta = 0;
  int target_delta = 0;
  std::vector<uint64_t> worker_ids;  // -N: exactly these
  std::string model;
  std::string drafter = "ngram";
  std::string draft_model;
  int threads = 0;  // target workers; 0 = hardware concurrency
  int target_tp = 1;
  std::string host = "127.0.0.1";  // where new target workers bind their data endpoint
  std::string log_dir;
  int drain_timeout_ms = 0;  // 0: the coordinator's
  absl::Duration wait = absl::Seconds(120);
  bool force = false;  // DrainRequest.force: the last target group may go
  proto::Role roll = proto::ROLE_UNSPECIFIED;  // --roll: replace every worker of this role
};

// "+N" or "-N" (N >= 1).
absl::StatusOr<int> ParseDelta(const CliArgs& args, const std::string& flag) {
  if (!args.Has(flag)) return 0;
  const std::string value = args.GetString(flag, "");
  int delta = 0;
  if (value.size() < 2 || (value[0] != '+' && value[0] != '-') ||
      !absl::SimpleAtoi(value.substr(1), &delta) || delta < 1 || delta > 64) {
    std::string hint = flag == "draft" ? "; the draft model's path is --draft-model PATH" : "";
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " takes a signed count +N or -N with N in [1, 64], got '", value, "'", hint));
  }
  return value[0] == '+' ? delta : -delta;
}

absl::StatusOr<ScaleFlags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, ScaleFlagTable()));
  ScaleFlags f;
  f.coordinator = args.GetString("coordinator", f.coordinator);
  f.force = args.Has("force");  // a switch: false when --force=false
  ASSIGN_OR_RETURN(f.draft_delta, ParseDelta(args, "draft"));
  ASSIGN_OR_RETURN(f.target_delta, ParseDelta(args, "target-groups"));
  if (args.Has("roll")) {
    const std::string roll = args.GetString("roll", "");
    if (roll != "draft" && roll != "target") {
      return absl::InvalidArgumentError(
          absl::StrCat("--roll '", roll, "': must be draft or target"));
    }
    if (f.draft_delta != 0 || f.target_delta != 0 || args.Has("worker-ids")) {
      return absl::InvalidArgumentError(
          "--roll goes without --draft, --target-groups and --worker-ids");
    }
    f.roll = roll == "draft" ? proto::ROLE_DRAFT_WORKER : proto::ROLE_TARGET_WORKER;
  } else if (f.draft_delta == 0 && f.target_delta == 0) {
    return absl::InvalidArgumentError(
        "nothing to do: give --draft +N|-N and/or --target-groups +N|-N (or --roll ROLE)");
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, args.GetIntList("worker-ids"));
  for (int32_t id : ids) {
    if (id < 1)
      return absl::InvalidArgumentError(absl::StrCat("--worker-ids: ", id, " is not a worker id"));
    f.worker_ids.push_back(static_cast<uint64_t>(id));
  }
  if (!f.worker_ids.empty()) {
    const bool one_shrink = (f.draft_delta < 0) != (f.target_delta < 0);
    const int shrink = f.draft_delta < 0 ? -f.draft_delta : -f.target_delta;
    if (!one_shrink || shrink != static_cast<int>(f.worker_ids.size())) {
      return absl::InvalidArgumentError(
          "--worker-ids goes with exactly one of --draft -N / --target-groups -N, N being the "
          "number of ids");
    }
  }
  f.model = args.GetString("model", DefaultModelPath());
  f.draft_model = args.GetString("draft-model", "");
  f.drafter = args.GetString("drafter", f.draft_model.empty() ? "ngram" : "model");
  f.host = args.GetString("host", f.host);
  f.log_dir = args.GetString("log-dir", absl::StrCat(RepositoryRoot(), "/build/cluster"));
  ASSIGN_OR_RETURN(int threads, args.GetInt<int>("threads", 0));
  ASSIGN_OR_RETURN(int target_tp, args.GetInt<int>("target-tp", 1));
  ASSIGN_OR_RETURN(int drain_timeout_ms, args.GetInt<int>("drain-timeout-ms", 0));
  ASSIGN_OR_RETURN(int64_t wait_s, args.GetInt<int64_t>("wait-s", 120));
  if (threads < 0 || threads > 1024)
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, " out of range"));
  if (target_tp < 1 || target_tp > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target-tp ", target_tp, " out of range [1, 64]"));
  }
  if (drain_timeout_ms < 0) return absl::InvalidArgumentError("--drain-timeout-ms must be >= 0");
  if (wait_s < 1)
    return absl::InvalidArgumentError(absl::StrCat("--wait-s must be >= 1, got ", wait_s));
  f.threads = static_cast<int>(threads);
  f.target_tp = static_cast<int>(target_tp);
  f.drain_timeout_ms = static_cast<int>(drain_timeout_ms);
  f.wait = absl::Seconds(wait_s);
  const bool grows = f.draft_delta > 0 || f.target_delta > 0 || f.roll != proto::ROLE_UNSPECIFIED;
  if (grows && !std::filesystem::exists(f.model)) {
    return absl::NotFoundError(absl::StrCat("model ", f.model, " not found; pass --model PATH"));
  }
  return f;
}

void PrintLine(const std::string& json) {
  std::printf("%s\n", json.c_str());
  std::fflush(stdout);
}

// A worker process this command started, detached: it outlives this command.
struct Started {
  std::string name;
  std::string role;  // "draft" or "target"
  Subprocess process;
  bool exited = false;
};

std::string LogTail(const std::string& path) {
  std::string log = ReadFileOrEmpty(path);
  return log.size() > 2000 ? log.substr(log.size() - 2000) : log;
}

absl::StatusOr<std::vector<Started>> StartWorkers(const ScaleFlags& f) {
  std::filesystem::create_directories(f.log_dir);
  const std::string bin = BinaryDirectory();
  const std::string tag = absl::StrCat("scale-", getpid());
  const std::string threads = std::to_string(
      f.threads > 0 ? f.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::vector<Started> started;
  const char* keys_dir = std::getenv("SPLITSPEC_KEYS");
  auto spawn = [&](const std::vector<std::string>& argv, const std::string& name,
                   const std::string& role) {
    if (keys_dir != nullptr && *keys_dir != '\0') {
      // A key of its own (draft.d/NAME, target.d/NAME), which the coordinator and
      // the targets pick up from the directory while they run; a directory this
      // command may not write (a mounted secret) leaves it the role's shared key.
      absl::StatusOr<net::CurveKeyPair> keys = net::GenerateCurveKeyPair();
      absl::Status written =
          keys.ok() ? net::WriteKeyFiles(absl::StrCat(keys_dir, "/", role, ".d"), name, *keys)
                    : keys.status();
      if (!written.ok()) {
        std::fprintf(stderr, "splitspec scale: %s gets the shared %s key: %s\n", name.c_str(),
                     role.c_str(), std::string(written.message()).c_str());
      }
    }
    const std::string log = absl::StrCat(f.log_dir, "/", name, ".log");
    absl::StatusOr<Subprocess> process = Subprocess::SpawnDetached(argv, log);
    if (!process.ok()) return process.status();
    PrintLine(absl::StrCat(R"({"event":"started","role":")", role, R"(","name":)", JsonQuote(name),
                           R"(,"pid":)", process->pid(), R"(,"log":)", JsonQuote(log), "}"));
    started.push_back(Started{name, role, *std::move(process)});
    return absl::OkStatus();
  };
  absl::Status status = absl::OkStatus();
  for (int g = 0; g < f.target_delta && status.ok(); ++g) {
    const std::string group = absl::StrCat(tag, "-", g);
    for (int rank = 0; rank < f.target_tp && status.ok(); ++rank) {
      const std::string name = f.target_tp == 1 ? group : absl::StrCat(group, "-rank-", rank);
      std::vector<std::string> argv = {bin + "/splitspec-target-worker",
                                       "--coordinator",
                                       f.coordinator,
                                       "--name",
                                       name,
                                       "--model",
                                       f.model,
                                       "--threads",
                                       threads,
                                       "--data-endpoint",
                                       absl::StrCat("tcp://", f.host, ":*")};
      if (f.target_tp > 1) {
        argv.insert(argv.end(), {"--tp-group", group, "--tp-rank", std::to_string(rank),
                                 "--tp-size", std::to_string(f.target_tp)});
      }
      status = spawn(argv, name, "target");
    }
  }
  for (int d = 0; d < f.draft_delta && status.ok(); ++d) {
    const std::string name = absl::StrCat(tag, "-draft-", d);
    // One thread, as `splitspec serve` gives its draft workers.
    std::vector<std::string> argv = {bin + "/splitspec-draft-worker",
                                     "--coordinator",
                                     f.coordinator,
                                     "--name",
                                     name,
                                     "--drafter",
                                     f.drafter,
                                     "--target-model",
                                     f.model,
                                     "--threads",
                                     "1"};
    if (!f.draft_model.empty()) argv.insert(argv.end(), {"--draft", f.draft_model});
    status = spawn(argv, name, "draft");
  }
  if (!status.ok()) {
    for (Started& s : started) s.process.Signal(SIGTERM);
    return status;
  }
  return started;
}

// Waits until every started worker is ALIVE in the coordinator's membership;
// on failure (one exited, or the wait ran out) stops them all.
absl::Status WaitRegistered(const ScaleFlags& f, std::vector<Started>& started) {
  const absl::Time deadline = absl::Now() + f.wait;
  std::map<std::string, bool> announced;
  absl::Status failure =
      absl::DeadlineExceededError(absl::StrCat("new workers did not register with ", f.coordinator,
                                               " within ", absl::FormatDuration(f.wait)));
  while (absl::Now() < deadline && absl::IsDeadlineExceeded(failure)) {
    for (Started& s : started) {
      if (s.exited) continue;
      absl::StatusOr<int> code = s.process.Wait(absl::ZeroDuration());
      if (!code.ok()) continue;  // still running
      s.exited = true;
      const std::string& log = s.process.log_path();
      failure = absl::UnavailableError(absl::StrCat("worker ", s.name, " exited with ", *code,
                                                    " before registering; log ", log, ":\n",
                                                    LogTail(log)));
    }
    absl::StatusOr<proto::StatusReply> status =
        net::FetchCoordinatorStatus(f.coordinator, absl::Seconds(2));
    if (status.ok() && absl::IsDeadlineExceeded(failure)) {
      for (const proto::MemberStatus& m : status->members()) {
        if (m.state() != proto::MEMBER_STATE_ALIVE || announced[m.worker_name()]) continue;
        for (const Started& s : started) {
          if (s.name != m.worker_name()) continue;
          announced[s.name] = true;
          PrintLine(absl::StrCat(R"({"event":"registered","role":")", s.role, R"(","name":)",
                                 JsonQuote(s.name), R"(,"worker_id":)", m.worker_id(), "}"));
        }
      }
      int registered = 0;
      for (const Started& s : started) registered += announced[s.name];
      if (registered == static_cast<int>(started.size())) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  for (Started& s : started) {
    if (!s.exited) s.process.Signal(SIGTERM);
  }
  return failure;
}

// Sends the DrainRequest for `delta` (< 0) workers of `role` and waits until
// every worker it drains has left (or died: its requests are re-placed too).
absl::Status Shrink(const ScaleFlags& f, proto::Role role, int delta) {
  proto::DrainRequest request;
  request.set_role(role);
  if (f.worker_ids.empty()) {
    request.set_count(static_cast<uint32_t>(-delta));
  } else {
    for (uint64_t id : f.worker_ids) request.add_worker_ids(id);
  }
  request.set_reason(absl::StrCat("splitspec scale (pid ", getpid(), ")"));
  request.set_timeout_ms(static_cast<uint32_t>(f.drain_timeout_ms));
  request.set_force(f.force);
  ASSIGN_OR_RETURN(proto::DrainReply reply,
                   net::RequestDrain(f.coordinator, request, absl::Seconds(10)));
  const char* role_name = role == proto::ROLE_DRAFT_WORKER ? "draft" : "target";
  PrintLine(absl::StrCat(R"({"event":"draining","role":")", role_name, R"(","worker_ids":[)",
                         absl::StrJoin(reply.worker_ids(), ","), "]}"));
  std::map<uint64_t, bool> gone;
  const absl::Time deadline = absl::Now() + f.wait;
  while (absl::Now() < deadline) {
    absl::StatusOr<proto::StatusReply> status =
        net::FetchCoordinatorStatus(f.coordinator, absl::Seconds(2));
    if (status.ok()) {
      for (const proto::MemberStatus& m : status->members()) {
        const bool drained = std::find(reply.worker_ids().begin(), reply.worker_ids().end(),
                                       m.worker_id()) != reply.worker_ids().end();
        const bool left =
            m.state() == proto::MEMBER_STATE_LEFT || m.state() == proto::MEMBER_STATE_DEAD;
        if (!drained || !left || gone[m.worker_id()]) continue;
        gone[m.worker_id()] = true;
        PrintLine(absl::StrCat(R"({"event":")",
                               m.state() == proto::MEMBER_STATE_LEFT ? "left" : "died",
                               R"(","role":")", role_name, R"(","worker_id":)", m.worker_id(),
                               R"(,"name":)", JsonQuote(m.worker_name()), "}"));
      }
      if (static_cast<int>(gone.size()) == reply.worker_ids_size()) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("drained workers did not leave within ", absl::FormatDuration(f.wait),
                   " (a target group's drain may take --drain-timeout-ms; raise --wait-s)"));
}

absl::Status PrintPools(const ScaleFlags& f) {
  ASSIGN_OR_RETURN(proto::StatusReply status,
                   net::FetchCoordinatorStatus(f.coordinator, absl::Seconds(5)));
  int drafts = 0, groups = 0, draining = 0;
  for (const proto::MemberStatus& m : status.members()) {
    const bool serving =
        m.state() == proto::MEMBER_STATE_ALIVE || m.state() == proto::MEMBER_STATE_SUSPECT;
    drafts += serving && m.role() == proto::ROLE_DRAFT_WORKER;
    groups += serving && m.role() == proto::ROLE_TARGET_WORKER && m.tp_rank() == 0;
    draining += m.state() == proto::MEMBER_STATE_DRAINING;
  }
  PrintLine(absl::StrCat(R"({"event":"pools","draft_workers":)", drafts, R"(,"target_groups":)",
                         groups, R"(,"draining":)", draining, "}"));
  return absl::OkStatus();
}

// --roll: as many new workers of the role as serve now, then the old ones drained.
absl::Status Roll(const ScaleFlags& f) {
  ASSIGN_OR_RETURN(proto::StatusReply status,
                   net::FetchCoordinatorStatus(f.coordinator, absl::Seconds(5)));
  ScaleFlags roll = f;
  for (const proto::MemberStatus& m : status.members()) {
    const bool serving =
        m.state() == proto::MEMBER_STATE_ALIVE || m.state() == proto::MEMBER_STATE_SUSPECT;
    // A target group is drained through its leader.
    if (serving && m.role() == f.roll && m.tp_rank() == 0) roll.worker_ids.push_back(m.worker_id());
  }
  const int count = static_cast<int>(roll.worker_ids.size());
  if (count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--roll: no serving ", f.roll == proto::ROLE_DRAFT_WORKER ? "draft worker" : "target group",
        " to replace"));
  }
  ScaleFlags grow = f;
  (f.roll == proto::ROLE_DRAFT_WORKER ? grow.draft_delta : grow.target_delta) = count;
  ASSIGN_OR_RETURN(std::vector<Started> started, StartWorkers(grow));
  RETURN_IF_ERROR(WaitRegistered(f, started));
  RETURN_IF_ERROR(Shrink(roll, f.roll, -count));
  return PrintPools(f);
}

absl::Status Scale(const ScaleFlags& f) {
  // Fail before starting anything if the coordinator is not there.
  RETURN_IF_ERROR(net::FetchCoordinatorStatus(f.coordinator, absl::Seconds(5)).status());
  if (f.roll != proto::ROLE_UNSPECIFIED) return Roll(f);
  if (f.draft_delta > 0 || f.target_delta > 0) {
    ScaleFlags grow = f;
    grow.draft_delta = std::max(f.draft_delta, 0);
    grow.target_delta = std::max(f.target_delta, 0);
    ASSIGN_OR_RETURN(std::vector<Started> started, StartWorkers(grow));
    RETURN_IF_ERROR(WaitRegistered(f, started));
  }
  // Shrink after growing, so `--target-groups -1 --draft +1` never strands a request.
  if (f.target_delta < 0) RETURN_IF_ERROR(Shrink(f, proto::ROLE_TARGET_WORKER, f.target_delta));
  if (f.draft_delta < 0) RETURN_IF_ERROR(Shrink(f, proto::ROLE_DRAFT_WORKER, f.draft_delta));
  return PrintPools(f);
}

}  // namespace

int RunScaleCommand(const CommandArgs& args) {
  absl::StatusOr<ScaleFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec scale: %s\n", std::string(flags.status().message()).c_str());
    return absl::IsInvalidArgument(flags.status()) ? 2 : 1;
  }
  // Draining needs the admin key (SPLITSPEC_KEYS=DIR holding admin.key); the
  // workers it starts inherit SPLITSPEC_KEYS and load their own role's key.
  absl::Status status = net::ConfigureProcessSecurity(net::kAdmin);
  if (status.ok()) status = Scale(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec scale: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace splitspec::tools
