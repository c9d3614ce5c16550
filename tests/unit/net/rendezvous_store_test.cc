#include <stdlib.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/net/channel.h"
#include "runtime/net/channel_rendezvous_store.h"
#include "runtime/net/rendezvous_server.h"
#include "runtime/net/rendezvous_wire.h"

namespace splitspec::net {
namespace {

using internal::DecodeRendezvousMessage;
using internal::EncodeRendezvousMessage;
using internal::RendezvousMessage;
using internal::RendezvousOp;
using ::testing::HasSubstr;

// A new directory for each store: file keys from an earlier run must not be read.
std::string FreshDirectory() {
  std::string pattern = ::testing::TempDir() + "/rendezvous-XXXXXX";
  return mkdtemp(pattern.data());
}

TEST(RendezvousWireTest, RoundTripsEveryField) {
  RendezvousMessage m;
  m.op = RendezvousOp::kGet;
  m.request_id = 0x0102030405060708ull;
  m.wait_ms = 1234567;
  m.key = "group-a/gloo/rank_1";
  m.value = std::string("\0\x01\xff value", 10);
  auto back = DecodeRendezvousMessage(EncodeRendezvousMessage(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->op, m.op);
  EXPECT_EQ(back->request_id, m.request_id);
  EXPECT_EQ(back->wait_ms, m.wait_ms);
  EXPECT_EQ(back->key, m.key);
  EXPECT_EQ(back->value, m.value);
}

TEST(RendezvousWireTest, RefusesMalformedFramesSayingWhy) {
  RendezvousMessage m;
  m.op = RendezvousOp::kSet;
  m.key = "k";
  m.value = "value";
  const std::string good = EncodeRendezvousMessage(m);
  EXPECT_THAT(DecodeRendezvousMessage("SPSF" + good.substr(4)).status().message(),
              HasSubstr("does not start with"));
  EXPECT_THAT(DecodeRendezvousMessage(good.substr(0, good.size() - 2)).status().message(),
              HasSubstr("value length 5 exceeds the 3 bytes left"));
  EXPECT_THAT(DecodeRendezvousMessage(good + "x").status().message(),
              HasSubstr("1 trailing bytes"));
  std::string bad_op = good;
  bad_op[4] = 42;
  EXPECT_THAT(DecodeRendezvousMessage(bad_op).status().message(), HasSubstr("unknown op 42"));
  EXPECT_THAT(DecodeRendezvousMessage("SPKV\x01").status().message(),
              HasSubstr("ends inside request_id"));
}

// The same behaviour from both stores.
class RendezvousStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static int counter = 0;
    const std::string name = absl::StrCat("rendezvous-", GetParam(), "-", counter++);
    if (GetParam() == "file") {
      const std::string directory = FreshDirectory();
      auto store = FileRendezvousStore::Open(directory);
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
      auto other = FileRendezvousStore::Open(directory);
      ASSERT_TRUE(other.ok()) << other.status();
      other_ = std::move(*other);
    } else {
      auto server =
          RendezvousServer::Start(GetParam() == "tcp" ? "tcp://127.0.0.1:*" : "mem://" + name);
      ASSERT_TRUE(server.ok()) << server.status();
      server_ = std::move(*server);
      auto store = ConnectRendezvousStore(server_->endpoint(), "rank-0");
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = std::move(*store);
      auto other = ConnectRendezvousStore(server_->endpoint(), "rank-1");
      ASSERT_TRUE(other.ok()) << other.status();
      other_ = std::move(*other);
    }
  }

  std::unique_ptr<RendezvousServer> server_;
  std::unique_ptr<RendezvousStore> store_;  // two clients of one store
  std::unique_ptr<RendezvousStore> other_;
};

TEST_P(RendezvousStoreTest, AValueSetByOneRankIsReadByAnother) {
  const std::string value("address\0bytes", 13);
  ASSERT_TRUE(store_->Set("group-a/rank-0", value).ok());
  auto got = other_->Get("group-a/rank-0", absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
}

TEST_P(RendezvousStoreTest, SettingAKeyTwiceIsRefusedAndKeepsTheFirstValue) {
  ASSERT_TRUE(store_->Set("group-a/once", "first").ok());
  absl::Status again = other_->Set("group-a/once", "second");
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(again.message(), HasSubstr("'group-a/once' is already set"));
  auto got = store_->Get("group-a/once", absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "first");
}

TEST_P(RendezvousStoreTest, GetWaitsForALaterSet) {
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_TRUE(other_->Set("late/key", "here").ok());
  });
  auto got = store_->Get("late/key", absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
}

TEST_P(RendezvousStoreTest, GetOfAKeyNobodySetsTimesOutNamingIt) {
  auto got = store_->Get("never/set", absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("'never/set' not set"));
  EXPECT_THAT(got.status().message(), HasSubstr("200ms"));
}

INSTANTIATE_TEST_SUITE_P(Stores, RendezvousStoreTest, ::testing::Values("file", "tcp", "mem"));

TEST(RendezvousServerTest, DropsAndCountsMalformedFramesAndKeepsServing) {
  auto server = RendezvousServer::Start("tcp://127.0.0.1:*");
  ASSERT_TRUE(server.ok()) << server.status();
  auto raw = ConnectChannel((*server)->endpoint(), "garbage");
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_TRUE((*raw)->SendBytes("", "not a rendezvous frame").ok());
  auto store = ConnectRendezvousStore((*server)->endpoint(), "rank-0");
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Set("k", "v").ok());  // answered after the garbage
  auto got = (*store)->Get("k", absl::Seconds(5));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "v");
  EXPECT_EQ((*server)->malformed_frames(), 1u);
  EXPECT_EQ((*server)->keys_set(), 1u);
}

TEST(RendezvousServerTest, AClientOfADeadServerFailsWithUnavailable) {
  auto server = RendezvousServer::Start("tcp://127.0.0.1:*");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string endpoint = (*server)->endpoint();
  server->reset();
  auto store = ConnectRendezvousStore(endpoint, "rank-0", absl::Milliseconds(200));
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status s = (*store)->Set("k", "v");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("did not answer about key 'k'"));
}

}  // namespace
}  // namespace splitspec::net
