#include "tests/testing/gloo_group.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/dist/gloo_communicator.h"
#include "runtime/net/channel_rendezvous_store.h"
#include "runtime/net/rendezvous_server.h"

namespace splitspec::net {
namespace {

struct Group {
  std::string name;
  std::string directory;  // fresh, for the file store and the ipc socket
};

Group NewGroup() {
  static std::atomic<int> counter{0};
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base ? base : "/tmp", "/splitspec-gloo-XXXXXX");
  const char* made = mkdtemp(pattern.data());
  return {absl::StrCat("group-", getpid(), "-", counter.fetch_add(1)), made ? made : "/tmp"};
}

bool IsAbsent(const GlooGroupOptions& options, int rank) {
  return std::find(options.absent_ranks.begin(), options.absent_ranks.end(), rank) !=
         options.absent_ranks.end();
}

// Everything one rank does: (rank 0: serve the store,) connect, create, run.
absl::Status RunRank(const GlooGroupOptions& options, const Group& group, int rank,
                     const RankBody& body) {
  if (IsAbsent(options, rank)) return absl::OkStatus();
  const std::string endpoint = absl::StrCat("ipc://", group.directory, "/store.sock");
  std::unique_ptr<RendezvousServer> server;
  std::unique_ptr<RendezvousStore> store;
  if (options.use_channel_store) {
    if (rank == 0) {
      ASSIGN_OR_RETURN(server, RendezvousServer::Start(endpoint));
    }
    ASSIGN_OR_RETURN(store,
                     ConnectRendezvousStore(endpoint, absl::StrCat(group.name, "/rank-", rank)));
  } else {
    ASSIGN_OR_RETURN(store, FileRendezvousStore::Open(group.directory + "/store"));
  }
  CommunicatorOptions comm_options{
      .group = group.name, .rank = rank, .size = options.size, .timeout = options.timeout};
  GlooTransportOptions transport;
  transport.hostname = "127.0.0.1";
  transport.rendezvous_timeout = options.rendezvous_timeout;
  ASSIGN_OR_RETURN(std::unique_ptr<GlooCommunicator> comm,
                   GlooCommunicator::Create(*store, comm_options, transport));
  return body(*comm);
}

}  // namespace

std::vector<absl::Status> RunGlooRanksAsThreads(const GlooGroupOptions& options,
                                                const RankBody& body) {
  const Group group = NewGroup();
  std::vector<absl::Status> results(options.size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < options.size; ++rank) {
    threads.emplace_back([&, rank] { results[rank] = RunRank(options, group, rank, body); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

std::vector<absl::Status> RunGlooRanksAsProcesses(const GlooGroupOptions& options,
                                                  const RankBody& body) {
  const Group group = NewGroup();
  std::vector<pid_t> children;
  for (int rank = 0; rank < options.size; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      const absl::Status s = RunRank(options, group, rank, body);
      std::ofstream(absl::StrCat(group.directory, "/rank-", rank, ".status")) << s.ToString();
      _exit(s.ok() ? 0 : 1);
    }
    children.push_back(pid);
  }
  std::vector<absl::Status> results(options.size);
  for (int rank = 0; rank < options.size; ++rank) {
    int wait_status = 0;
    if (children[rank] < 0 || waitpid(children[rank], &wait_status, 0) < 0) {
      results[rank] = absl::InternalError(absl::StrCat("rank ", rank, ": fork/wait failed"));
      continue;
    }
    std::stringstream text;
    text << std::ifstream(absl::StrCat(group.directory, "/rank-", rank, ".status")).rdbuf();
    if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) {
      results[rank] = absl::OkStatus();
    } else {
      results[rank] = absl::InternalError(
          absl::StrCat("rank ", rank, " exited with status ", wait_status, ": ", text.str()));
    }
  }
  return results;
}

}  // namespace splitspec::net
