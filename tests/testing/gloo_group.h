// Runs the ranks of one Gloo group on loopback, as threads of this process or
// as forked child processes, for tests (library splitspec_testing).
//
//   std::vector<absl::Status> results = RunGlooRanksAsThreads(
//       {.size = 3}, [](Communicator& comm) -> absl::Status {
//         std::vector<float> x(576, comm.rank());
//         return comm.AllReduceSum(x.data(), x.size());
//       });
//   for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
//
// Each run uses a fresh group: a new directory for the FileRendezvousStore
// (or a RendezvousServer on ipc:// when use_channel_store), and a new group name.
#ifndef SPLITSPEC_TESTS_TESTING_GLOO_GROUP_H_
#define SPLITSPEC_TESTS_TESTING_GLOO_GROUP_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/dist/communicator.h"

namespace splitspec::net {

struct GlooGroupOptions {
  int size = 2;
  absl::Duration timeout = absl::Seconds(10);  // of every collective (and the rendezvous)
  // Of the rendezvous when not zero: tests of short collective timeouts keep a long one
  // here, so that ranks slow to start on a loaded machine still meet.
  absl::Duration rendezvous_timeout = absl::ZeroDuration();
  // Ranks that never create a communicator (they return OK at once): the others'
  // rendezvous must time out.
  std::vector<int> absent_ranks = {};
  // Rendezvous through a RendezvousServer (the leader's store) instead of a directory.
  bool use_channel_store = false;
};

using RankBody = std::function<absl::Status(Communicator& comm)>;

// One thread per rank; returns each rank's status (Create's error, or body's).
std::vector<absl::Status> RunGlooRanksAsThreads(const GlooGroupOptions& options,
                                                const RankBody& body);

// One forked child process per rank (the caller only waits). A child reports
// its status through a file; a child that crashes or is killed reads as Internal.
// Call only from a process that has not used ZeroMQ yet when use_channel_store
// is set (the children create their own context after fork).
std::vector<absl::Status> RunGlooRanksAsProcesses(const GlooGroupOptions& options,
                                                  const RankBody& body);

}  // namespace splitspec::net

#endif  // SPLITSPEC_TESTS_TESTING_GLOO_GROUP_H_
