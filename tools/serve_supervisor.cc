#include "tools/serve_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::tools {
namespace {

constexpr int kQuotedLogLines = 20;

std::string LogTail(const Subprocess& process) {
  return absl::StrCat("last lines of ", process.log_path(), ":\n",
                      LastLines(process.ReadLog(), kQuotedLogLines));
}

}  // namespace

std::set<uint32_t> PidsDeclaredDead(const std::vector<proto::MemberStatus>& members) {
  std::set<uint32_t> dead, live;
  for (const proto::MemberStatus& m : members) {
    if (m.pid() == 0) continue;
    if (m.state() == proto::MEMBER_STATE_DEAD) dead.insert(m.pid());
    if (m.state() == proto::MEMBER_STATE_ALIVE || m.state() == proto::MEMBER_STATE_SUSPECT ||
        m.state() == proto::MEMBER_STATE_DRAINING) {
      live.insert(m.pid());
    }
  }
  for (uint32_t pid : live) dead.erase(pid);
  return dead;
}

Supervisor::Supervisor(std::vector<PlannedProcess> plan,
                       std::vector<std::vector<std::string>> environments, RestartPolicy policy,
                       std::FILE* out)
    : out_(out) {
  processes_.reserve(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    processes_.push_back(Supervised{
        .plan = std::move(plan[i]),
        .env = i < environments.size() ? std::move(environments[i]) : std::vector<std::string>(),
        .process = std::nullopt,
        .tracker = RestartTracker(policy)});
  }
}

absl::Status Supervisor::StartAll() {
  for (Supervised& s : processes_) {
    absl::StatusOr<Subprocess> child = Subprocess::Spawn(
        s.plan.argv, s.plan.log, s.env, LogMode::kTruncate, OnParentDeath::kDie);
    if (!child.ok()) return child.status();
    s.process.emplace(*std::move(child));
    s.state = State::kRunning;
    s.started_at = absl::Now();
    std::fprintf(out_, "==> %s (pid %d, log %s)\n", s.plan.name.c_str(), s.process->pid(),
                 s.plan.log.c_str());
  }
  std::fflush(out_);
  return absl::OkStatus();
}

absl::Status Supervisor::CheckStarted(absl::Time now) { return Supervise(now, true); }

absl::Status Supervisor::Run(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    if (absl::Status step = Step(absl::Now()); !step.ok()) return step;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::OkStatus();
}

void Supervisor::WatchHeartbeats(MemberProbe probe, absl::Duration period) {
  probe_ = std::move(probe);
  probe_period_ = period;
  next_probe_ = absl::Now();
}

void Supervisor::KillHungWorkers(absl::Time now) {
  absl::StatusOr<std::vector<proto::MemberStatus>> members = probe_();
  if (!members.ok()) return;
  const std::set<uint32_t> dead = PidsDeclaredDead(*members);
  std::set<uint32_t> listed;
  for (const proto::MemberStatus& m : *members) listed.insert(m.pid());
  for (Supervised& s : processes_) {
    if (s.state != State::kRunning || s.plan.role == "coordinator" || !s.process.has_value() ||
        s.killed_unregistered) {
      continue;
    }
    const uint32_t pid = static_cast<uint32_t>(s.process->pid());
    s.registered = s.registered || listed.contains(pid);
    if (dead.contains(pid)) {
      Report(s, absl::StrCat("==> ", s.plan.name, " (pid ", pid,
                             ") stopped heartbeating: the coordinator declared it dead; SIGKILL"));
      s.process->Signal(SIGKILL);  // reaped and restarted by the steps that follow
    } else if (!s.registered && now - s.started_at >= register_timeout_) {
      Report(s, absl::StrCat("==> ", s.plan.name, " (pid ", pid,
                             ") did not register with the coordinator within ",
                             absl::FormatDuration(register_timeout_), " of its start; SIGKILL"));
      s.killed_unregistered = true;
      s.process->Signal(SIGKILL);
    }
  }
}

absl::Status Supervisor::Step(absl::Time now) { return Supervise(now, false); }

absl::Status Supervisor::Supervise(absl::Time now, bool starting) {
  if (probe_ && now >= next_probe_) {
    next_probe_ = now + probe_period_;
    KillHungWorkers(now);
  }
  for (Supervised& s : processes_) {
    if (s.state == State::kWaitingToRestart && now >= s.restart_at) {
      if (absl::Status restarted = Restart(s, now); !restarted.ok()) return restarted;
      continue;
    }
    if (s.state != State::kRunning || !s.process.has_value()) continue;
    const pid_t pid = s.process->pid();
    absl::StatusOr<int> exited = s.process->Wait(absl::ZeroDuration());
    if (!exited.ok()) continue;
    if (starting && !s.killed_unregistered) {
      return absl::UnavailableError(absl::StrCat(s.plan.name, " ", DescribeExit(*exited),
                                                 " during start-up; log ", s.plan.log, ":\n",
                                                 s.process->ReadLog()));
    }
    if (absl::Status handled = OnExit(s, pid, *exited, now); !handled.ok()) return handled;
  }
  return absl::OkStatus();
}

absl::Status Supervisor::OnExit(Supervised& s, pid_t pid, int code, absl::Time now) {
  const std::string what = absl::StrCat(s.plan.name, " (pid ", pid, ") ", DescribeExit(code));
  if (s.plan.role == "coordinator") {
    return absl::UnavailableError(absl::StrCat(
        what, "; the cluster cannot serve without its coordinator; ", LogTail(*s.process)));
  }
  if (code == 0) {
    // Drained by `splitspec scale`: its requests finished or were handed over.
    s.state = State::kLetGo;
    Report(s, absl::StrCat("==> ", what, ": drained; the cluster keeps running without it"));
    return absl::OkStatus();
  }
  absl::StatusOr<absl::Duration> delay = s.tracker.OnDeath(now);
  if (!delay.ok()) {
    Report(s, absl::StrCat("==> ", what, "; not restarted: ", delay.status().message()));
    return absl::UnavailableError(absl::StrCat(
        what, " and is not restarted: it ", delay.status().message(), "; ", LogTail(*s.process)));
  }
  s.state = State::kWaitingToRestart;
  s.restart_at = now + *delay;
  Report(s, absl::StrCat("==> ", what, "; restart ", s.tracker.total_restarts(), " in ",
                         absl::FormatDuration(*delay), "; the cluster keeps serving"));
  return absl::OkStatus();
}

absl::Status Supervisor::Restart(Supervised& s, absl::Time now) {
  s.process.reset();  // reaped already: nothing to kill
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn(s.plan.argv, s.plan.log, s.env, LogMode::kAppend, OnParentDeath::kDie);
  if (!child.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot restart ", s.plan.name, ": ", child.status().message()));
  }
  s.process.emplace(*std::move(child));
  s.state = State::kRunning;
  s.restart_at = absl::InfiniteFuture();
  s.started_at = now;
  s.registered = false;
  s.killed_unregistered = false;
  Report(s, absl::StrCat("==> ", s.plan.name, " restarted (pid ", s.process->pid(), ", restart ",
                         s.tracker.total_restarts(), ")"));
  return absl::OkStatus();
}

void Supervisor::Report(const Supervised& s, const std::string& line) {
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  std::ofstream(s.plan.log, std::ios::app) << "splitspec serve: " << line << "\n";
}

void Supervisor::StopAll() {
  // Workers first (they deregister), the coordinator last (its front door
  // then ends every open stream with an error event): the plan starts with it.
  auto stop = [](Supervised& s, absl::Time deadline) {
    if (s.process.has_value() && s.process->running() &&
        !s.process->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration())).ok()) {
      s.process->Kill();
    }
  };
  for (Supervised& s : processes_) {
    s.state = State::kLetGo;
    if (s.plan.role == "coordinator" || !s.process.has_value()) continue;
    s.process->Signal(SIGTERM);
    s.process->Signal(SIGCONT);  // a stopped process must run to see SIGTERM
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  for (Supervised& s : processes_) {
    if (s.plan.role != "coordinator") stop(s, deadline);
  }
  for (Supervised& s : processes_) {
    if (s.plan.role != "coordinator" || !s.process.has_value()) continue;
    s.process->Signal(SIGTERM);
    s.process->Signal(SIGCONT);
    stop(s, absl::Now() + absl::Seconds(5));
  }
}

pid_t Supervisor::pid(size_t i) const {
  const Supervised& s = processes_[i];
  return s.state == State::kRunning && s.process.has_value() ? s.process->pid() : 0;
}

}  // namespace splitspec::tools
