// When `splitspec serve` restarts a worker that died, and when it gives up
// (tools/serve_supervisor.h runs the processes).
//
//   RestartTracker tracker(policy);
//   absl::StatusOr<absl::Duration> delay = tracker.OnDeath(absl::Now());
//   if (!delay.ok()) ... crash-looping: stop the cluster, naming the process ...
//   else ... restart it after *delay ...
//
// With the defaults a worker that dies at once every time is restarted after
// 250 ms, 500 ms, 1 s, 2 s and 4 s; its sixth death within 60 s stops the cluster.
#ifndef SPLITSPEC_TOOLS_RESTART_POLICY_H_
#define SPLITSPEC_TOOLS_RESTART_POLICY_H_

#include <deque>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace splitspec::tools {

struct RestartPolicy {
  // The first restart within a window waits initial_backoff, each further
  // one twice the last, at most max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(250);
  absl::Duration max_backoff = absl::Seconds(8);
  // Restarts allowed within `window`; the next death stops the cluster.
  // 0: never restart (any worker death stops the cluster).
  int max_restarts = 5;
  absl::Duration window = absl::Seconds(60);

  // InvalidArgument naming the field.
  absl::Status Validate() const;
};

// One process's restart history. Pure (the caller passes the clock).
class RestartTracker {
 public:
  explicit RestartTracker(RestartPolicy policy) : policy_(policy) {}

  // The process died at `now`: the delay before restarting it, or
  // ResourceExhausted ("died N times within W") when restarting it would
  // exceed max_restarts within the window. Deaths older than the window are
  // forgotten, so a worker that ran a whole window starts over at
  // initial_backoff.
  absl::StatusOr<absl::Duration> OnDeath(absl::Time now);
  int total_restarts() const { return total_restarts_; }

 private:
  RestartPolicy policy_;
  std::deque<absl::Time> recent_restarts_;  // within the window, oldest first
  int total_restarts_ = 0;
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_RESTART_POLICY_H_
