// Helpers to run a cluster of splitspec processes on loopback in a test.
#ifndef SPLITSPEC_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
#define SPLITSPEC_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"
#include "tests/integration/child_process.h"

namespace splitspec::testing {

// bin/name beside the tests/ folder of the running test binary (found from /proc/self/exe,
// never a compiled-in path): build/<preset>/bin in a build tree, bin/ in the GPU bundle
// (tools/gpu/bundle.sh), wherever either was moved.
std::string BinaryPath(const std::string& name);

// Starts splitspec-coordinator on a free loopback port with the given extra
// flags and returns it with its control endpoint (read from --endpoint-file).
absl::StatusOr<std::pair<ChildProcess, std::string>> StartCoordinator(
    const std::string& dir, const std::vector<std::string>& extra_flags);

// Asks the coordinator for its status over a fresh channel.
absl::StatusOr<proto::StatusReply> FetchStatus(const std::string& endpoint);

// Polls FetchStatus until `done` holds (true) or `attempts` run out (false).
// Each attempt waits `pause`. Bounded by count: never a timed assertion.
bool PollStatusUntil(const std::string& endpoint,
                     const std::function<bool(const proto::StatusReply&)>& done, int attempts,
                     absl::Duration pause, proto::StatusReply* last);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
