// GroupDirectory: the coordinator's relay of tensor-parallel group rendezvous.
#include "coordinator/group_directory.h"

#include "gtest/gtest.h"

namespace splitspec::coordinator {
namespace {

proto::GroupAnnounce Announce(const std::string& group, const std::string& endpoint,
                              uint64_t generation) {
  proto::GroupAnnounce a;
  a.set_group(group);
  a.set_rendezvous_endpoint(endpoint);
  a.set_generation(generation);
  a.set_tp_size(2);
  return a;
}

proto::GroupLookup Lookup(const std::string& group, uint64_t min_generation) {
  proto::GroupLookup l;
  l.set_group(group);
  l.set_min_generation(min_generation);
  return l;
}

TEST(GroupDirectoryTest, UnknownGroupIsNotFound) {
  GroupDirectory groups;
  proto::GroupInfo info = groups.Lookup(Lookup("g0", 0));
  EXPECT_FALSE(info.found());
  EXPECT_EQ(info.group(), "g0");
}

TEST(GroupDirectoryTest, FollowersFindTheLatestGeneration) {
  GroupDirectory groups;
  EXPECT_TRUE(groups.Announce(Announce("g0", "tcp://10.0.0.1:7000", 5)).found());
  proto::GroupInfo info = groups.Lookup(Lookup("g0", 0));
  ASSERT_TRUE(info.found());
  EXPECT_EQ(info.rendezvous_endpoint(), "tcp://10.0.0.1:7000");
  EXPECT_EQ(info.generation(), 5u);
  EXPECT_EQ(info.tp_size(), 2u);
  // A follower that saw generation 5 fail waits for 6.
  EXPECT_FALSE(groups.Lookup(Lookup("g0", 6)).found());
  groups.Announce(Announce("g0", "tcp://10.0.0.1:7001", 6));
  EXPECT_EQ(groups.Lookup(Lookup("g0", 6)).rendezvous_endpoint(), "tcp://10.0.0.1:7001");
  // Groups are independent.
  EXPECT_FALSE(groups.Lookup(Lookup("g1", 0)).found());
}

TEST(GroupDirectoryTest, StaleAnnouncementIsNotRecordedAndTheEchoSaysWhichIs) {
  GroupDirectory groups;
  groups.Announce(Announce("g0", "tcp://new:1", 9));
  proto::GroupInfo echo = groups.Announce(Announce("g0", "tcp://old:1", 3));
  EXPECT_EQ(echo.generation(), 9u);
  EXPECT_EQ(echo.rendezvous_endpoint(), "tcp://new:1");
  EXPECT_EQ(groups.Lookup(Lookup("g0", 0)).rendezvous_endpoint(), "tcp://new:1");
}

TEST(GroupDirectoryTest, MalformedAnnouncementsAreRefused) {
  GroupDirectory groups;
  EXPECT_FALSE(groups.Announce(Announce("", "tcp://a:1", 1)).found());
  EXPECT_FALSE(groups.Announce(Announce("g0", "", 1)).found());
  proto::GroupAnnounce tp1 = Announce("g0", "tcp://a:1", 1);
  tp1.set_tp_size(1);
  EXPECT_FALSE(groups.Announce(tp1).found());
  EXPECT_EQ(groups.size(), 0);
}

}  // namespace
}  // namespace splitspec::coordinator
