#include "runtime/dist/gloo_communicator.h"

#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/base/status_macros.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "tests/testing/gloo_group.h"

namespace splitspec::net {
namespace {

using ::testing::HasSubstr;

// Fresh values for (rank, seed): every rank and every test sees different data.
std::vector<float> RankData(int rank, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed * 131 + rank);
  std::uniform_real_distribution<float> dist(-10.f, 10.f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// Equality of floats by bits: collectives must not change a value.
absl::Status ExpectBitwise(const std::vector<float>& got, const std::vector<float>& want,
                           const std::string& what) {
  if (got.size() != want.size()) return absl::InternalError(what + ": size differs");
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return absl::InternalError(
          absl::StrCat(what, ": element ", i, " is ", got[i], ", expected ", want[i]));
    }
  }
  return absl::OkStatus();
}

// `timeout` bounds each collective; the rendezvous gets a minute unless a rank is absent
// (then its timing out is what the test is about), so a loaded machine (CI, sanitizers)
// cannot fail a join the test needs.
GlooGroupOptions Ranks(int size, absl::Duration timeout = absl::Seconds(10), int absent_rank = -1) {
  GlooGroupOptions options;
  options.size = size;
  options.timeout = timeout;
  if (absent_rank >= 0) options.absent_ranks.push_back(absent_rank);
  if (absent_rank < 0) options.rendezvous_timeout = absl::Minutes(1);
  return options;
}

void ExpectAllOk(const std::vector<absl::Status>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

class GlooCommunicatorTest : public ::testing::TestWithParam<int> {};

// ((r0 + r1) + r2) + ... element by element, computed here from every rank's data.
std::vector<float> RankOrderedSum(int size, int64_t count, uint32_t seed) {
  std::vector<float> sum = RankData(0, count, seed);
  for (int r = 1; r < size; ++r) {
    const std::vector<float> part = RankData(r, count, seed);
    for (int64_t i = 0; i < count; ++i) sum[i] += part[i];
  }
  return sum;
}

TEST_P(GlooCommunicatorTest, AllReduceSumIsTheRankOrderedSum) {
  const int size = GetParam();
  for (int64_t count : {int64_t{576}, int64_t{49152}, int64_t{3}}) {
    const std::vector<float> want = RankOrderedSum(size, count, 7);
    ExpectAllOk(RunGlooRanksAsThreads(Ranks(size), [&](Communicator& comm) -> absl::Status {
      std::vector<float> data = RankData(comm.rank(), count, 7);
      RETURN_IF_ERROR(comm.AllReduceSum(data.data(), count));
      return ExpectBitwise(data, want, absl::StrCat("all_reduce of ", count));
    }));
  }
}

TEST_P(GlooCommunicatorTest, AllGatherConcatenatesInRankOrder) {
  const int size = GetParam();
  const int64_t count = 1001;
  ExpectAllOk(RunGlooRanksAsThreads(Ranks(size), [&](Communicator& comm) -> absl::Status {
    const std::vector<float> mine = RankData(comm.rank(), count, 11);
    std::vector<float> out(size * count, -1.f);
    RETURN_IF_ERROR(comm.AllGather(mine.data(), count, out.data()));
    std::vector<float> want;
    for (int r = 0; r < size; ++r) {
      const std::vector<float> part = RankData(r, count, 11);
      want.insert(want.end(), part.begin(), part.end());
    }
    return ExpectBitwise(out, want, "all_gather");
  }));
}

TEST_P(GlooCommunicatorTest, BroadcastCopiesTheRootsBytesAndFloats) {
  const int size = GetParam();
  const int root = size - 1;
  ExpectAllOk(RunGlooRanksAsThreads(Ranks(size), [&](Communicator& comm) -> absl::Status {
    std::vector<float> floats = RankData(comm.rank(), 300, 13);
    RETURN_IF_ERROR(comm.BroadcastFloats(floats.data(), floats.size(), root));
    RETURN_IF_ERROR(ExpectBitwise(floats, RankData(root, 300, 13), "broadcast floats"));
    std::string plan(1024, static_cast<char>('a' + comm.rank()));
    RETURN_IF_ERROR(comm.Broadcast(plan.data(), plan.size(), root));
    if (plan != std::string(1024, static_cast<char>('a' + root))) {
      return absl::InternalError("broadcast bytes differ from the root's");
    }
    return absl::OkStatus();
  }));
}

TEST_P(GlooCommunicatorTest, BroadcastStringSendsALengthOnlyTheRootKnows) {
  const int size = GetParam();
  ExpectAllOk(RunGlooRanksAsThreads(Ranks(size), [&](Communicator& comm) -> absl::Status {
    std::string message =
        comm.rank() == 0 ? std::string("step 7: seq 3 tokens 4,5,6\0x", 28) : std::string("stale");
    RETURN_IF_ERROR(BroadcastString(comm, &message, /*root=*/0));
    if (message != std::string("step 7: seq 3 tokens 4,5,6\0x", 28)) {
      return absl::InternalError(absl::StrCat("rank ", comm.rank(), " got '", message, "'"));
    }
    std::string empty = comm.rank() == 0 ? "" : "old";
    RETURN_IF_ERROR(BroadcastString(comm, &empty, 0));
    return empty.empty() ? absl::OkStatus() : absl::InternalError("empty message not empty");
  }));
}

// Element i's sum depends only on element i: the same whatever the count.
TEST_P(GlooCommunicatorTest, AllReduceSumIsIndependentOfTheCount) {
  const int size = GetParam();
  ExpectAllOk(RunGlooRanksAsThreads(Ranks(size), [&](Communicator& comm) -> absl::Status {
    std::vector<float> big = RankData(comm.rank(), 20000, 17);
    std::vector<float> small(big.begin(), big.begin() + 5);
    RETURN_IF_ERROR(comm.AllReduceSum(big.data(), big.size()));
    RETURN_IF_ERROR(comm.AllReduceSum(small.data(), small.size()));
    return ExpectBitwise(small, std::vector<float>(big.begin(), big.begin() + 5), "prefix");
  }));
}

// What the ranks that did call a collective must see when one rank does not:
// a failure naming the call and the timeout, then a broken communicator.
// `also_allowed`: a second acceptable code (kOk if none); `seen` (nullable): the code.
absl::Status CheckFailedCollective(Communicator& comm, absl::StatusCode expected_code,
                                   absl::StatusCode also_allowed = absl::StatusCode::kOk,
                                   absl::StatusCode* seen = nullptr) {
  std::vector<float> data(576, 1.f);
  absl::Status s = comm.AllReduceSum(data.data(), data.size());
  if (seen != nullptr) *seen = s.code();
  if (s.ok()) return absl::InternalError("all_reduce succeeded without every rank");
  if (s.code() != expected_code && s.code() != also_allowed)
    return absl::InternalError("unexpected code: " + s.ToString());
  if (s.message().find("all_reduce_sum of 576 floats") == std::string::npos ||
      s.message().find("timeout 1s") == std::string::npos) {
    return absl::InternalError(absl::StrCat("message lacks the call or timeout: ", s.message()));
  }
  absl::Status after = comm.Broadcast(data.data(), 4, 0);
  if (!absl::IsFailedPrecondition(after) ||
      after.message().find("broken by an earlier failure") == std::string::npos) {
    return absl::InternalError(absl::StrCat("later call: ", after.ToString()));
  }
  return absl::OkStatus();
}

// The absent rank is alive and connected but never calls: the others fail instead of
// hanging. The first to reach its timeout sees DeadlineExceeded; Gloo then closes that
// rank's connections, so a rank whose collective started a little later (a loaded
// machine) may see the closed connection (Unavailable) before its own timeout: seen
// once at 3 ranks. Each must fail one of these two ways, and one must time out.
TEST_P(GlooCommunicatorTest, ARankThatNeverJoinsMakesTheOthersTimeOut) {
  const int size = GetParam();
  const int absent = size - 1;
  std::atomic<int> finished{0}, timed_out{0};
  ExpectAllOk(RunGlooRanksAsThreads(Ranks(size, absl::Seconds(1)), [&](Communicator& comm) {
    if (comm.rank() == absent) {  // stay connected until the others have failed
      while (finished.load() < size - 1) absl::SleepFor(absl::Milliseconds(10));
      return absl::OkStatus();
    }
    absl::StatusCode code = absl::StatusCode::kOk;
    absl::Status s = CheckFailedCollective(comm, absl::StatusCode::kDeadlineExceeded,
                                           absl::StatusCode::kUnavailable, &code);
    timed_out.fetch_add(code == absl::StatusCode::kDeadlineExceeded ? 1 : 0);
    finished.fetch_add(1);
    // Stay too: a rank that returns closes its connections, and a peer still waiting on it
    // would then see Unavailable instead of its own timeout (seen once in CI at 3 ranks).
    while (finished.load() < size - 1) absl::SleepFor(absl::Milliseconds(10));
    return s;
  }));
  EXPECT_GE(timed_out.load(), 1) << "no rank reached its own timeout";
}

// The absent rank closes its communicator (a dead process): its direct peers see
// the closed connection (Unavailable) without waiting for the timeout; a rank
// that was waiting on a survivor instead may time out.
TEST_P(GlooCommunicatorTest, ARankThatLeavesMakesTheOthersFail) {
  const int size = GetParam();
  ExpectAllOk(RunGlooRanksAsThreads(Ranks(size, absl::Seconds(1)), [&](Communicator& comm) {
    // A first collective that every rank joins: the whole group is connected
    // before rank 0 leaves (under sanitizers the connection setup is slow).
    float one = 1.f;
    if (absl::Status joined = comm.AllReduceSum(&one, 1); !joined.ok()) return joined;
    if (comm.rank() == 0) return absl::OkStatus();  // returns: its communicator is destroyed
    return CheckFailedCollective(comm, absl::StatusCode::kUnavailable,
                                 absl::StatusCode::kDeadlineExceeded);
  }));
}

TEST_P(GlooCommunicatorTest, RendezvousTimesOutWhenARankIsMissing) {
  const int size = GetParam();
  std::vector<absl::Status> results =
      RunGlooRanksAsThreads(Ranks(size, absl::Milliseconds(500), /*absent_rank=*/1),
                            [](Communicator&) { return absl::OkStatus(); });
  for (int r = 0; r < size; ++r) {
    if (r == 1) continue;
    EXPECT_TRUE(absl::IsDeadlineExceeded(results[r])) << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("gloo rendezvous of group"));
  }
}

// A rendezvous timeout of its own bounds the join (and the error names it), while the
// collectives keep theirs.
TEST_P(GlooCommunicatorTest, RendezvousTimeoutIsSeparateFromTheCollectives) {
  const int size = GetParam();
  GlooGroupOptions options = Ranks(size, absl::Seconds(30), /*absent_rank=*/1);
  options.rendezvous_timeout = absl::Milliseconds(300);
  std::vector<absl::Status> results =
      RunGlooRanksAsThreads(options, [](Communicator&) { return absl::OkStatus(); });
  for (int r = 0; r < size; ++r) {
    if (r == 1) continue;
    EXPECT_TRUE(absl::IsDeadlineExceeded(results[r])) << "rank " << r << ": " << results[r];
    EXPECT_THAT(results[r].message(), HasSubstr("timeout 300ms"));
  }
  options = Ranks(size, absl::Seconds(7));
  options.rendezvous_timeout = absl::Seconds(40);
  ExpectAllOk(RunGlooRanksAsThreads(options, [](Communicator& comm) -> absl::Status {
    // A collective first: a rank that returned at once would close its connections
    // while a peer may still be finishing its join.
    float one = 1.f;
    RETURN_IF_ERROR(comm.AllReduceSum(&one, 1));
    if (comm.timeout() != absl::Seconds(7))
      return absl::InternalError(absl::StrCat("timeout ", absl::FormatDuration(comm.timeout())));
    return absl::OkStatus();
  }));
}

TEST_P(GlooCommunicatorTest, RendezvousThroughTheLeadersStore) {
  const int size = GetParam();
  GlooGroupOptions options = Ranks(size);
  options.use_channel_store = true;
  ExpectAllOk(RunGlooRanksAsThreads(options, [&](Communicator& comm) -> absl::Status {
    std::vector<float> data = RankData(comm.rank(), 64, 19);
    RETURN_IF_ERROR(comm.AllReduceSum(data.data(), data.size()));
    return ExpectBitwise(data, RankOrderedSum(size, 64, 19), "all_reduce via channel store");
  }));
}

INSTANTIATE_TEST_SUITE_P(Sizes, GlooCommunicatorTest, ::testing::Values(2, 3),
                         [](const auto& info) { return absl::StrCat("Ranks", info.param); });

std::string FreshDirectory() {
  std::string pattern = ::testing::TempDir() + "/gloo-XXXXXX";
  return mkdtemp(pattern.data());
}

TEST(GlooCommunicatorOptionsTest, RefusesARankOutsideTheGroup) {
  auto store = FileRendezvousStore::Open(FreshDirectory());
  ASSERT_TRUE(store.ok()) << store.status();
  auto comm = GlooCommunicator::Create(**store, {.group = "g", .rank = 2, .size = 2});
  EXPECT_TRUE(absl::IsInvalidArgument(comm.status()));
  EXPECT_THAT(comm.status().message(), HasSubstr("rank = 2 outside [0, 2)"));
  auto unnamed = GlooCommunicator::Create(**store, {.group = "", .rank = 0, .size = 1});
  EXPECT_THAT(unnamed.status().message(), HasSubstr("group name is empty"));
}

TEST(GlooCommunicatorOptionsTest, ASingleRankGroupNeedsNoPeers) {
  auto store = FileRendezvousStore::Open(FreshDirectory());
  ASSERT_TRUE(store.ok()) << store.status();
  GlooTransportOptions transport;
  transport.hostname = "127.0.0.1";
  auto comm = GlooCommunicator::Create(**store, {.group = "solo", .rank = 0, .size = 1}, transport);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> data = {1.5f, -2.f};
  ASSERT_TRUE((*comm)->AllReduceSum(data.data(), 2).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.f}));
  std::vector<float> out(2);
  ASSERT_TRUE((*comm)->AllGather(data.data(), 2, out.data()).ok());
  EXPECT_EQ(out, data);
}

}  // namespace
}  // namespace splitspec::net
