#include "runtime/net/ordered_outbox.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {
namespace {

// A channel whose send queue can be made full, or made to fail otherwise; it keeps
// the request ids of what it accepted, in order.
class ScriptedChannel final : public Channel {
 public:
  absl::Status SendBytes(absl::string_view peer, std::string bytes) override {
    if (full) return absl::ResourceExhaustedError("queue full");
    if (!fail_next.ok()) return std::exchange(fail_next, absl::OkStatus());
    absl::StatusOr<proto::Envelope> envelope = DecodeEnvelope(bytes);
    EXPECT_TRUE(envelope.ok()) << envelope.status();
    EXPECT_EQ(peer, "");
    sent.push_back(envelope->verify_result().request_id());
    return absl::OkStatus();
  }
  absl::StatusOr<RawFrame> ReceiveBytes(absl::Duration) override {
    return absl::DeadlineExceededError("none");
  }
  std::string endpoint() const override { return "scripted://"; }
  bool Readable() override { return false; }

  bool full = false;
  absl::Status fail_next;
  std::vector<std::string> sent;
};

proto::Envelope Result(const std::string& id) {
  proto::Envelope envelope = NewEnvelope();
  envelope.mutable_verify_result()->set_request_id(id);
  return envelope;
}

TEST(OrderedOutboxTest, AFullQueueDelaysButNeverDropsOrReorders) {
  ScriptedChannel channel;
  OrderedOutbox outbox("", 100);
  ASSERT_TRUE(outbox.Send(channel, Result("a")).ok());
  channel.full = true;
  ASSERT_TRUE(outbox.Send(channel, Result("b")).ok());
  ASSERT_TRUE(outbox.Send(channel, Result("c")).ok());
  EXPECT_EQ(outbox.pending(), 2u);
  ASSERT_TRUE(outbox.Flush(channel).ok());
  EXPECT_EQ(outbox.pending(), 2u);
  channel.full = false;
  // A newer envelope goes out only after the waiting ones.
  ASSERT_TRUE(outbox.Send(channel, Result("d")).ok());
  EXPECT_TRUE(outbox.empty());
  EXPECT_EQ(channel.sent, (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(OrderedOutboxTest, OtherErrorsDropOnlyTheFrontAndAreReturned) {
  ScriptedChannel channel;
  OrderedOutbox outbox("", 100);
  channel.full = true;
  ASSERT_TRUE(outbox.Send(channel, Result("a")).ok());
  ASSERT_TRUE(outbox.Send(channel, Result("b")).ok());
  channel.full = false;
  channel.fail_next = absl::UnavailableError("closed");
  EXPECT_TRUE(absl::IsUnavailable(outbox.Flush(channel)));
  EXPECT_EQ(outbox.pending(), 1u);
  ASSERT_TRUE(outbox.Flush(channel).ok());
  EXPECT_EQ(channel.sent, (std::vector<std::string>{"b"}));
}

TEST(OrderedOutboxTest, RefusesPastMaxPendingNamingTheBacklog) {
  ScriptedChannel channel;
  channel.full = true;
  OrderedOutbox outbox("", 3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(outbox.Send(channel, Result(absl::StrCat(i))).ok());
  const absl::Status refused = outbox.Send(channel, Result("3"));
  EXPECT_TRUE(absl::IsResourceExhausted(refused));
  EXPECT_EQ(refused.message(),
            "outbox to '' on scripted:// holds 3 unsent envelopes; dropping this one");
  channel.full = false;
  ASSERT_TRUE(outbox.Flush(channel).ok());
  EXPECT_EQ(channel.sent, (std::vector<std::string>{"0", "1", "2"}));
}

}  // namespace
}  // namespace splitspec::net
