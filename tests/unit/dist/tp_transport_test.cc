// Choosing a tensor-parallel group's transport (runtime/dist/tp_transport.h) and
// the exchanges through the rendezvous store behind it and behind the NCCL
// unique id (runtime/dist/store_exchange.h). All on the CPU: the reports are
// written here as a rank on a GPU machine would send them.
#include "runtime/dist/tp_transport.h"

#include <stdlib.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/dist/store_exchange.h"

namespace splitspec::net {
namespace {

using ::testing::HasSubstr;

RankDevice Gpu(const std::string& host, int ordinal, const std::string& uuid,
               TpComm requested = TpComm::kAuto) {
  return RankDevice{.host = host,
                    .device = absl::StrCat("cuda:", ordinal),
                    .gpu_id = uuid,
                    .requested = requested,
                    .nccl_built = true};
}

std::vector<RankDevice> WithRequest(std::vector<RankDevice> ranks, TpComm requested) {
  for (RankDevice& r : ranks) r.requested = requested;
  return ranks;
}

std::string FreshDirectory(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name + "-XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

TEST(TpTransportTest, ParsesEveryNameAndRefusesOthersByValue) {
  for (TpComm comm : {TpComm::kAuto, TpComm::kNccl, TpComm::kGloo}) {
    absl::StatusOr<TpComm> parsed = ParseTpComm(TpCommName(comm));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, comm);
  }
  const absl::StatusOr<TpComm> bad = ParseTpComm("mpi");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'mpi'"));
}

TEST(TpTransportTest, AReportSurvivesEncodingAndAMalformedOneIsRefused) {
  const RankDevice sent =
      Gpu("node-a", 3, "GPU-00112233-4455-6677-8899-aabbccddeeff", TpComm::kNccl);
  absl::StatusOr<RankDevice> got = DecodeRankDevice(EncodeRankDevice(sent));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->host, sent.host);
  EXPECT_EQ(got->device, sent.device);
  EXPECT_EQ(got->gpu_id, sent.gpu_id);
  EXPECT_EQ(got->requested, TpComm::kNccl);
  EXPECT_TRUE(got->nccl_built);
  const RankDevice cpu{.host = "node-b",
                       .device = "cpu",
                       .gpu_id = "",
                       .requested = TpComm::kGloo,
                       .nccl_built = false};
  got = DecodeRankDevice(EncodeRankDevice(cpu));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->device, "cpu");
  EXPECT_EQ(got->gpu_id, "");
  EXPECT_FALSE(got->nccl_built);
  EXPECT_EQ(DecodeRankDevice("node-a\tcuda:0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(DecodeRankDevice("h\tcpu\t\tmpi\tnccl").status().message()),
              HasSubstr("'mpi'"));
}

TEST(TpTransportTest, AutoChoosesNcclWhenEveryRankHasAGpuOfItsOwn) {
  // Same host, both ordinal 0 (CUDA_VISIBLE_DEVICES=0 and =1), different GPUs.
  const std::vector<RankDevice> ranks = {Gpu("node-a", 0, "GPU-a"), Gpu("node-a", 0, "GPU-b")};
  for (TpComm requested : {TpComm::kAuto, TpComm::kNccl}) {
    absl::StatusOr<TpTransportChoice> choice =
        ChooseTpTransport("g", WithRequest(ranks, requested));
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->transport, TpTransport::kNccl) << TpCommName(requested);
  }
  absl::StatusOr<TpTransportChoice> gloo =
      ChooseTpTransport("g", WithRequest(ranks, TpComm::kGloo));
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_EQ(gloo->transport, TpTransport::kGloo);
}

// Past two ranks NCCL's sum order may depend on the size: auto keeps Gloo's
// batch-invariant rank order; nccl takes NCCL and says what it costs.
TEST(TpTransportTest, AutoKeepsGlooPastTwoRanksAndNcclSaysWhy) {
  const std::vector<RankDevice> ranks = {Gpu("node-a", 0, "GPU-a"), Gpu("node-a", 1, "GPU-b"),
                                         Gpu("node-b", 0, "GPU-c"), Gpu("node-b", 1, "GPU-d")};
  absl::StatusOr<TpTransportChoice> automatic = ChooseTpTransport("g", ranks);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->transport, TpTransport::kGloo);
  EXPECT_THAT(automatic->reason, HasSubstr("with 4 ranks NCCL's sum order may change"));
  absl::StatusOr<TpTransportChoice> forced =
      ChooseTpTransport("g", WithRequest(ranks, TpComm::kNccl));
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(forced->transport, TpTransport::kNccl);
  EXPECT_THAT(forced->reason, HasSubstr("not batch invariant"));
}

TEST(TpTransportTest, TwoRanksOnOneGpuFallBackUnderAutoAndAreRefusedUnderNccl) {
  // Ranks 1 and 2 report the same UUID on the same host, under different ordinals.
  const std::vector<RankDevice> ranks = {Gpu("node-a", 0, "GPU-a"), Gpu("node-a", 1, "GPU-b"),
                                         Gpu("node-a", 2, "GPU-b")};
  absl::StatusOr<TpTransportChoice> fallback = ChooseTpTransport("g", ranks);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->transport, TpTransport::kGloo);
  EXPECT_THAT(fallback->reason, HasSubstr("ranks 1 and 2 both run on GPU"));
  const absl::StatusOr<TpTransportChoice> refused =
      ChooseTpTransport("g", WithRequest(ranks, TpComm::kNccl));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("tp group 'g': --tp-comm nccl refused: ranks 1 and 2 both run on GPU "
                        "cuda:1 (GPU-b on host node-a)"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--tp-comm gloo"));
}

TEST(TpTransportTest, WithoutUuidsTheSameOrdinalOnOneHostIsOneGpu) {
  const std::vector<RankDevice> ranks = {Gpu("node-a", 0, "", TpComm::kNccl),
                                         Gpu("node-a", 0, "", TpComm::kNccl)};
  const absl::StatusOr<TpTransportChoice> refused = ChooseTpTransport("g", ranks);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("ranks 0 and 1 both run on GPU cuda:0 (UUID unknown on host node-a)"));
  // The same ordinal on two hosts is two GPUs.
  const std::vector<RankDevice> two_hosts = {Gpu("node-a", 0, "", TpComm::kNccl),
                                             Gpu("node-b", 0, "", TpComm::kNccl)};
  absl::StatusOr<TpTransportChoice> choice = ChooseTpTransport("g", two_hosts);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->transport, TpTransport::kNccl);
}

TEST(TpTransportTest, NcclIsRefusedForACpuRankOrABuildWithoutIt) {
  std::vector<RankDevice> ranks = {Gpu("node-a", 0, "GPU-a", TpComm::kNccl),
                                   Gpu("node-a", 1, "", TpComm::kNccl)};
  ranks[1].device = "cpu";
  EXPECT_THAT(std::string(ChooseTpTransport("g", ranks).status().message()),
              HasSubstr("rank 1 runs on cpu, NCCL needs a CUDA device"));
  ranks[1] = Gpu("node-a", 1, "GPU-b", TpComm::kNccl);
  ranks[1].nccl_built = false;
  EXPECT_THAT(std::string(ChooseTpTransport("g", ranks).status().message()),
              HasSubstr("rank 1's binary was built without NCCL"));
  absl::StatusOr<TpTransportChoice> fallback =
      ChooseTpTransport("g", WithRequest(ranks, TpComm::kAuto));
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->transport, TpTransport::kGloo);
}

TEST(TpTransportTest, RanksNamingDifferentCommsAreRefusedNamingBoth) {
  const std::vector<RankDevice> ranks = {Gpu("node-a", 0, "GPU-a", TpComm::kNccl),
                                         Gpu("node-a", 1, "GPU-b", TpComm::kNccl),
                                         Gpu("node-a", 2, "GPU-c", TpComm::kGloo)};
  const absl::StatusOr<TpTransportChoice> refused = ChooseTpTransport("g", ranks);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("rank 0 was started with --tp-comm nccl, rank 2 with --tp-comm gloo"));
}

// Every rank (a thread with its own store handle on one directory) publishes its
// report and reads all of them, in rank order; all then choose alike.
TEST(StoreExchangeTest, EveryRankGathersEveryReportInRankOrder) {
  constexpr int kSize = 3;
  const std::string dir = FreshDirectory("tp-exchange");
  std::vector<absl::StatusOr<std::vector<RankDevice>>> got(kSize);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<FileRendezvousStore>> store = FileRendezvousStore::Open(dir);
      if (!store.ok()) {
        got[rank] = store.status();
        return;
      }
      got[rank] = ExchangeRankDevices(
          **store, {.group = "g/gen-1", .rank = rank, .size = kSize, .timeout = absl::Seconds(60)},
          Gpu("node-a", rank, absl::StrCat("GPU-", rank)));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < kSize; ++rank) {
    ASSERT_TRUE(got[rank].ok()) << "rank " << rank << ": " << got[rank].status();
    ASSERT_EQ(got[rank]->size(), kSize);
    for (int r = 0; r < kSize; ++r) {
      EXPECT_EQ((*got[rank])[r].device, absl::StrCat("cuda:", r));
      EXPECT_EQ((*got[rank])[r].gpu_id, absl::StrCat("GPU-", r));
    }
    absl::StatusOr<TpTransportChoice> choice =
        ChooseTpTransport("g", WithRequest(*got[rank], TpComm::kNccl));
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->transport, TpTransport::kNccl);
  }
}

// The NCCL unique id's path: rank 0 makes the bytes, every rank returns them.
TEST(StoreExchangeTest, RootBytesReachEveryRankAndOnlyRootMakesThem) {
  constexpr int kSize = 3;
  const std::string dir = FreshDirectory("tp-share");
  const std::string secret(128, '\0');  // an ncclUniqueId is 128 bytes, zeros included
  std::string made = secret;
  made[5] = '\x7f';
  std::vector<absl::StatusOr<std::string>> got(kSize);
  std::vector<int> makes(kSize, 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kSize; ++rank) {
    threads.emplace_back([&, rank] {
      absl::StatusOr<std::unique_ptr<FileRendezvousStore>> store = FileRendezvousStore::Open(dir);
      if (!store.ok()) {
        got[rank] = store.status();
        return;
      }
      got[rank] = ShareFromRoot(
          **store, {.group = "g/gen-1", .rank = rank, .size = kSize, .timeout = absl::Seconds(60)},
          "nccl/unique-id", made.size(), [&]() -> absl::StatusOr<std::string> {
            ++makes[rank];
            return made;
          });
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < kSize; ++rank) {
    ASSERT_TRUE(got[rank].ok()) << "rank " << rank << ": " << got[rank].status();
    EXPECT_EQ(*got[rank], made) << "rank " << rank;
    EXPECT_EQ(makes[rank], rank == 0 ? 1 : 0) << "rank " << rank;
  }
}

TEST(StoreExchangeTest, AValueOfTheWrongSizeIsRefusedNamingTheKey) {
  const std::string dir = FreshDirectory("tp-share-size");
  absl::StatusOr<std::unique_ptr<FileRendezvousStore>> store = FileRendezvousStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("g/nccl/unique-id", "short").ok());
  const absl::StatusOr<std::string> got =
      ShareFromRoot(**store, {.group = "g", .rank = 1, .size = 2}, "nccl/unique-id", 128,
                    []() -> absl::StatusOr<std::string> { return std::string(128, 'x'); });
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("rendezvous key 'g/nccl/unique-id' holds 5 bytes, expected 128"));
}

// A root that never publishes: the others fail (no hang), naming the key.
TEST(StoreExchangeTest, AnAbsentRootFailsTheOthersNamingTheKey) {
  const std::string dir = FreshDirectory("tp-share-absent");
  absl::StatusOr<std::unique_ptr<FileRendezvousStore>> store = FileRendezvousStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  const absl::StatusOr<std::string> got = ShareFromRoot(
      **store, {.group = "g", .rank = 1, .size = 2, .timeout = absl::Milliseconds(200)},
      "nccl/unique-id", 128, []() -> absl::StatusOr<std::string> { return std::string(); });
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("g/nccl/unique-id"));
}

}  // namespace
}  // namespace splitspec::net
