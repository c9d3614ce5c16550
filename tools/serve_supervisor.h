// How `splitspec serve` keeps a local cluster up: it runs the plan's processes
// (tools/serve_plan.h) and restarts a worker (draft worker, target rank, TP
// follower) that dies, with exponential back-off, while the rest keep serving.
// The coordinator re-places a dead target's requests from their committed
// tokens and gives a dead draft worker's requests to another (or lets the
// target decode alone), so a restart costs latency, not requests.
//
// The cluster stops (Run returns an error naming the process and quoting its
// log's last lines) only when the coordinator exits, or when a worker dies
// more than RestartPolicy.max_restarts times within RestartPolicy.window
// (it is crash-looping: a bad model path, a port taken, a GPU gone). A worker
// that exits with status 0 was drained (`splitspec scale`) and is let go.
//
// A worker that is alive but hung (SIGSTOPped, deadlocked) never exits; with
// WatchHeartbeats the supervisor asks the coordinator for its members and
// SIGKILLs a worker whose pid the coordinator declared DEAD (no heartbeat for
// its liveness window) and that has not registered again; it is then reaped
// and restarted as after a crash. With SetRegisterTimeout it also SIGKILLs a
// worker that has not registered (the coordinator lists no member with its
// pid) within the timeout after its start: one hung before its first
// registration (a stuck model load, a wrong key, a deadlock) never heartbeats,
// so the coordinator cannot declare it dead. It is restarted with the same
// back-off, and counted against --max-restarts, as a crash; during start-up
// too (CheckStarted), where any other exit still stops the start.
//
//   Supervisor supervisor(plan, environments, policy, stdout);
//   RETURN_IF_ERROR(supervisor.StartAll());
//   ... wait for registration, checking supervisor.CheckStarted() ...
//   absl::Status outcome = supervisor.Run(ShutdownRequested());
//   supervisor.StopAll();   // workers first, the coordinator last
//
// Every exit and restart is printed on `out` and written into the process's
// log (restarted processes append to it), e.g.
//   ==> draft-0 (pid 812) was killed by signal 9 (Killed); restart 1 in 250ms
//   ==> draft-0 restarted (pid 845, restart 1)
//   ==> target (pid 813) stopped heartbeating: the coordinator declared it dead; SIGKILL
//   ==> draft-0 (pid 820) did not register with the coordinator within 30s of its start; SIGKILL
// The coordinator's /metrics counts the restarts
// (splitspec_worker_restarts_total: new processes under a worker's name).
//
// Every process is spawned to die with serve (OnParentDeath::kDie): a serve
// killed with SIGKILL, which cannot stop its workers, leaves no orphans behind.
//
// Thread-compatible: one thread (serve's) drives it, and must live as long as
// the processes (the kernel ties their death signal to the spawning thread).
#ifndef SPLITSPEC_TOOLS_SERVE_SUPERVISOR_H_
#define SPLITSPEC_TOOLS_SERVE_SUPERVISOR_H_

#include <atomic>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/base/subprocess.h"
#include "tools/restart_policy.h"
#include "tools/serve_plan.h"

namespace splitspec::tools {

// The coordinator's members now (StatusReply.members), or why they could not be had.
using MemberProbe = std::function<absl::StatusOr<std::vector<proto::MemberStatus>>()>;

// The pids of `members` that the coordinator declared DEAD and that have no live
// (ALIVE, SUSPECT or DRAINING) registration: a process that stopped and resumed
// registers again under the same pid, and is not hung.
std::set<uint32_t> PidsDeclaredDead(const std::vector<proto::MemberStatus>& members);

class Supervisor {
 public:
  // `environments[i]`: the "NAME=VALUE" entries for plan[i] (see Subprocess::Spawn).
  Supervisor(std::vector<PlannedProcess> plan, std::vector<std::vector<std::string>> environments,
             RestartPolicy policy, std::FILE* out);
  // Kills whatever still runs (StopAll first for an orderly stop).
  ~Supervisor() = default;

  // Spawns every process in plan order (logs truncated). Errors: the first
  // spawn that failed (the ones started before it are killed with this object).
  absl::Status StartAll();
  // During start-up nothing that exits is restarted: Unavailable naming the
  // first process that exited, with its log; except a worker killed because
  // it did not register in time (SetRegisterTimeout), which is restarted as
  // Step would. Also runs the probes WatchHeartbeats set up.
  absl::Status CheckStarted(absl::Time now = absl::Now());
  // Supervises until `stop` is set (OkStatus) or the cluster must stop:
  // Unavailable naming the coordinator, or the crash-looping worker, with the
  // last lines of its log.
  absl::Status Run(const std::atomic<bool>& stop);
  // One supervision step at `now` (Run calls it every 100 ms): reaps exits,
  // schedules and performs restarts. Same errors as Run.
  absl::Status Step(absl::Time now);
  // From now on, every `period` Step asks `probe` and SIGKILLs each running
  // worker in PidsDeclaredDead (a failed probe is retried at the next period).
  void WatchHeartbeats(MemberProbe probe, absl::Duration period);
  // With WatchHeartbeats: a worker whose pid is not among the probed members
  // `timeout` after it was (re)started is SIGKILLed, then restarted with
  // back-off. InfiniteDuration (the default): never.
  void SetRegisterTimeout(absl::Duration timeout) { register_timeout_ = timeout; }
  // SIGTERM to each running process, workers in reverse plan order, the
  // coordinator last; SIGKILL after 5 s without an exit.
  void StopAll();

  // For tests and the start-up line: the pid of plan[i] now (0 while it waits
  // for a restart or after it was let go).
  pid_t pid(size_t i) const;
  int restarts(size_t i) const { return processes_[i].tracker.total_restarts(); }

 private:
  enum class State { kRunning, kWaitingToRestart, kLetGo };
  struct Supervised {
    PlannedProcess plan;
    std::vector<std::string> env;
    std::optional<Subprocess> process;
    RestartTracker tracker;
    State state = State::kRunning;
    absl::Time restart_at = absl::InfiniteFuture();
    absl::Time started_at = absl::InfinitePast();  // of the process running now
    bool registered = false;             // the coordinator listed its pid
    bool killed_unregistered = false;    // SIGKILLed for not registering in time
  };

  // Step's work; `starting`: CheckStarted's rules for exits.
  absl::Status Supervise(absl::Time now, bool starting);
  absl::Status OnExit(Supervised& s, pid_t pid, int code, absl::Time now);
  absl::Status Restart(Supervised& s, absl::Time now);
  // Asks probe_ and SIGKILLs the running workers the coordinator declared
  // dead, and those not registered within register_timeout_ of their start.
  void KillHungWorkers(absl::Time now);
  // Prints `line` on out_ and appends it to `s`'s log.
  void Report(const Supervised& s, const std::string& line);

  std::vector<Supervised> processes_;
  std::FILE* out_;
  MemberProbe probe_;
  absl::Duration probe_period_ = absl::InfiniteDuration();
  absl::Time next_probe_ = absl::InfiniteFuture();
  absl::Duration register_timeout_ = absl::InfiniteDuration();
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_SERVE_SUPERVISOR_H_
