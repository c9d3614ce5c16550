#include "coordinator/membership.h"

#include "gtest/gtest.h"

namespace splitspec::coordinator {
namespace {

constexpr absl::Duration kInterval = absl::Milliseconds(100);

MembershipOptions Options() {
  MembershipOptions options;
  options.heartbeat_interval = kInterval;
  options.suspect_after_missed = 2;
  options.dead_after_missed = 5;
  return options;
}

proto::Register Worker(const std::string& name) {
  proto::Register r;
  r.set_role(proto::ROLE_DRAFT_WORKER);
  r.set_worker_name(name);
  return r;
}

proto::Heartbeat Beat(uint64_t id) {
  proto::Heartbeat h;
  h.set_worker_id(id);
  return h;
}

proto::MemberState StateOf(const Membership& m, uint64_t id) {
  for (const proto::MemberStatus& s : m.Snapshot()) {
    if (s.worker_id() == id) return s.state();
  }
  return proto::MEMBER_STATE_UNSPECIFIED;
}

const absl::Time t0 = absl::FromUnixSeconds(1000);

TEST(MembershipTest, RegisterAssignsDistinctIncreasingIds) {
  Membership m(Options());
  const uint64_t a = m.Register(Worker("a"), t0);
  const uint64_t b = m.Register(Worker("b"), t0);
  EXPECT_GE(a, 1u);
  EXPECT_GT(b, a);
  EXPECT_EQ(m.Snapshot().size(), 2u);
}

// A worker re-sends Register until it hears the ack: the repeat names the member it already is,
// and a worker declared dead registers anew.
TEST(MembershipTest, ARepeatedRegistrationIsFoundUntilTheWorkerIsDead) {
  Membership m(Options());
  proto::Register r = Worker("w");
  r.set_host("h");
  r.set_pid(42);
  EXPECT_FALSE(m.FindRepeat(r).has_value());
  const uint64_t id = m.Register(r, t0);
  ASSERT_TRUE(m.FindRepeat(r).has_value());
  EXPECT_EQ(*m.FindRepeat(r), id);
  proto::Register other_process = r;
  other_process.set_pid(43);
  EXPECT_FALSE(m.FindRepeat(other_process).has_value());
  proto::Register no_pid = Worker("w");
  no_pid.set_host("h");
  EXPECT_FALSE(m.FindRepeat(no_pid).has_value()) << "without a pid nothing proves a repeat";
  m.Sweep(t0 + kInterval * 6);
  EXPECT_FALSE(m.FindRepeat(r).has_value()) << "a dead worker registers anew";
}

// The stated contract: SUSPECT at exactly 2 missed intervals, DEAD at exactly 5.
TEST(MembershipTest, SuspectAtTwoMissedIntervalsDeadAtFive) {
  Membership m(Options());
  const uint64_t id = m.Register(Worker("w"), t0);
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 1.99).empty());
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_ALIVE);
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 2).empty());
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_SUSPECT);
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 4.99).empty());
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_SUSPECT);
  EXPECT_EQ(m.Sweep(t0 + kInterval * 5), std::vector<uint64_t>{id});
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_DEAD);
  // Reported once only.
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 50).empty());
}

TEST(MembershipTest, HeartbeatRevivesSuspectAndResetsMissedCount) {
  Membership m(Options());
  const uint64_t id = m.Register(Worker("w"), t0);
  m.Sweep(t0 + kInterval * 3);
  ASSERT_EQ(StateOf(m, id), proto::MEMBER_STATE_SUSPECT);
  EXPECT_TRUE(m.Heartbeat(Beat(id), t0 + kInterval * 3));
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_ALIVE);
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 7.5).empty());  // 4.5 intervals after the heartbeat
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_SUSPECT);
  EXPECT_EQ(m.Snapshot()[0].missed_heartbeats(), 4u);
  EXPECT_EQ(m.Snapshot()[0].heartbeats_received(), 1u);
}

TEST(MembershipTest, DeadWorkerMustRegisterAgain) {
  Membership m(Options());
  const uint64_t id = m.Register(Worker("w"), t0);
  m.Sweep(t0 + kInterval * 6);
  EXPECT_FALSE(m.Heartbeat(Beat(id), t0 + kInterval * 6));
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_DEAD);
  EXPECT_FALSE(m.Heartbeat(Beat(12345), t0));  // unknown id
}

TEST(MembershipTest, DeregisterMarksLeftAndUnknownIdIsNotFound) {
  Membership m(Options());
  const uint64_t id = m.Register(Worker("w"), t0);
  ASSERT_TRUE(m.Deregister(id).ok());
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_LEFT);
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 100).empty());  // a LEFT worker never becomes DEAD
  const absl::Status status = m.Deregister(999);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("999"), std::string::npos);
}

TEST(MembershipTest, DrainingIsStickyUnderHeartbeatsAndEndsInLeftOrDead) {
  Membership m(Options());
  const uint64_t id = m.Register(Worker("w"), t0);
  ASSERT_TRUE(m.MarkDraining(id).ok());
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_DRAINING);
  EXPECT_TRUE(
      m.Heartbeat(Beat(id), t0 + kInterval));  // still known: it keeps heartbeating while it drains
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_DRAINING);
  EXPECT_TRUE(m.Sweep(t0 + kInterval * 3.5).empty());  // missed intervals do not make it SUSPECT
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_DRAINING);
  EXPECT_EQ(m.Sweep(t0 + kInterval * 6), std::vector<uint64_t>{id});  // but it can still die
  EXPECT_EQ(StateOf(m, id), proto::MEMBER_STATE_DEAD);

  const uint64_t other = m.Register(Worker("x"), t0);
  ASSERT_TRUE(m.MarkDraining(other).ok());
  ASSERT_TRUE(m.Deregister(other).ok());
  EXPECT_EQ(StateOf(m, other), proto::MEMBER_STATE_LEFT);
}

TEST(MembershipTest, MarkDrainingRefusesUnknownDeadAndLeftWorkers) {
  Membership m(Options());
  EXPECT_EQ(m.MarkDraining(42).code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.MarkDraining(42).message().find("42"), std::string::npos);
  const uint64_t id = m.Register(Worker("w"), t0);
  ASSERT_TRUE(m.Deregister(id).ok());
  const absl::Status status = m.MarkDraining(id);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("MEMBER_STATE_LEFT"), std::string::npos) << status;
}

TEST(MembershipTest, OptionsValidationNamesTheField) {
  MembershipOptions options = Options();
  options.dead_after_missed = 2;
  EXPECT_NE(options.Validate().message().find("dead_after_missed"), std::string::npos);
  options = Options();
  options.heartbeat_interval = absl::ZeroDuration();
  EXPECT_NE(options.Validate().message().find("heartbeat_interval"), std::string::npos);
  EXPECT_TRUE(Options().Validate().ok());
}

}  // namespace
}  // namespace splitspec::coordinator
