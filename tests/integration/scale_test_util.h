// Helpers for the run-time scaling tests: run `splitspec scale`, read its JSON
// lines, keep a steady load of greedy requests in flight and check each one
// against plain greedy decoding.
#ifndef SPLITSPEC_TESTS_INTEGRATION_SCALE_TEST_UTIL_H_
#define SPLITSPEC_TESTS_INTEGRATION_SCALE_TEST_UTIL_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"

namespace splitspec::testing {

// The output and exit code of one `splitspec scale` run.
struct ScaleRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  // Values of "key":N in the lines whose "event" is `event`, in order.
  std::vector<int64_t> Values(const std::string& event, const std::string& key) const;
};

// Runs `prefix... splitspec scale args...` (prefix: e.g. {"ip", "netns", "exec", NS}),
// logging to `log_path`; waits up to 10 minutes.
ScaleRun RunScale(const std::vector<std::string>& prefix, const std::vector<std::string>& args,
                  const std::string& log_path);

// SIGTERM, then SIGKILL after a grace period, for processes that are not our
// children (started detached by `splitspec scale`).
void StopDetached(const std::vector<pid_t>& pids);

// Keeps `in_flight` greedy requests running against a coordinator until
// `stop` is set, then lets the last ones finish; every finished request is
// checked against plain greedy. Runs on the calling thread.
//
// The bound on requests is per value of `phase`: a fast cluster that reaches it
// before the caller's next step waits for that step (or for `stop`) instead of
// ending the load, so every phase gets requests however slow the steps are
// (a single overall bound once ran out in phase 0 on a loaded machine, and
// nothing was left to test the later phases with).
struct LoadOptions {
  int in_flight = 16;
  int max_tokens = 48;
  int min_requests = 16;              // submit at least this many even if stopped early
  int max_requests_per_phase = 1000;  // a bound, so the load stays finite
  absl::Duration deadline = absl::Minutes(8);  // and so does a stuck cluster's
};
struct LoadOutcome {
  int submitted = 0;
  int finished_ok = 0;                // right length and equal to plain greedy
  std::vector<std::string> failures;  // one line per request that was not
  std::map<std::string, net::GenerationResult> results;
  std::map<std::string, int> phase_of;  // request -> value of `phase` when it was submitted
};
LoadOutcome RunGreedyLoad(const std::string& coordinator, model::Transformer& reference,
                          const std::vector<std::vector<int32_t>>& prompts,
                          const LoadOptions& options, const std::atomic<bool>& stop,
                          const std::atomic<int>& phase);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_SCALE_TEST_UTIL_H_
