// RestartTracker (tools/restart_policy.h): when `splitspec serve` restarts a
// dead worker, and when a crash loop stops the cluster. Fake clock.
#include "tools/restart_policy.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(RestartTrackerTest, BackOffDoublesUpToTheCap) {
  RestartTracker tracker(RestartPolicy{.initial_backoff = absl::Milliseconds(250),
                                       .max_backoff = absl::Seconds(1),
                                       .max_restarts = 10,
                                       .window = absl::Seconds(60)});
  std::vector<absl::Duration> delays;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<absl::Duration> delay = tracker.OnDeath(kStart + absl::Seconds(i));
    ASSERT_TRUE(delay.ok()) << delay.status();
    delays.push_back(*delay);
  }
  EXPECT_THAT(delays, ::testing::ElementsAre(absl::Milliseconds(250), absl::Milliseconds(500),
                                             absl::Seconds(1), absl::Seconds(1), absl::Seconds(1)));
  EXPECT_EQ(tracker.total_restarts(), 5);
}

TEST(RestartTrackerTest, OneDeathPastTheLimitWithinTheWindowGivesUp) {
  RestartTracker tracker(RestartPolicy{});  // 5 restarts within 60 s
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(tracker.OnDeath(kStart + absl::Seconds(10 * i)).ok());
  absl::StatusOr<absl::Duration> sixth = tracker.OnDeath(kStart + absl::Seconds(50));
  ASSERT_FALSE(sixth.ok());
  EXPECT_EQ(sixth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(sixth.status().message(), HasSubstr("died 6 times within 1m"));
  EXPECT_THAT(sixth.status().message(), HasSubstr("--max-restarts"));
  EXPECT_EQ(tracker.total_restarts(), 5);
}

TEST(RestartTrackerTest, DeathsOlderThanTheWindowAreForgotten) {
  RestartTracker tracker(RestartPolicy{.max_restarts = 2, .window = absl::Seconds(60)});
  ASSERT_TRUE(tracker.OnDeath(kStart).ok());
  ASSERT_TRUE(tracker.OnDeath(kStart + absl::Seconds(30)).ok());
  // The first restart left the window: one more is allowed, and its back-off
  // counts only the restart still inside (250 ms doubled once).
  absl::StatusOr<absl::Duration> third = tracker.OnDeath(kStart + absl::Seconds(61));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(*third, absl::Milliseconds(500));
  EXPECT_FALSE(tracker.OnDeath(kStart + absl::Seconds(62)).ok());
  // After a quiet window the back-off starts over.
  absl::StatusOr<absl::Duration> later = tracker.OnDeath(kStart + absl::Seconds(200));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(*later, absl::Milliseconds(250));
}

TEST(RestartTrackerTest, ZeroRestartsNeverRestarts) {
  RestartTracker tracker(RestartPolicy{.max_restarts = 0});
  absl::StatusOr<absl::Duration> delay = tracker.OnDeath(kStart);
  ASSERT_FALSE(delay.ok());
  EXPECT_THAT(delay.status().message(), HasSubstr("--max-restarts 0"));
}

TEST(RestartPolicyTest, ValidateNamesTheField) {
  EXPECT_THAT(RestartPolicy{.max_restarts = -1}.Validate().message(), HasSubstr("--max-restarts"));
  EXPECT_THAT(RestartPolicy{.window = absl::ZeroDuration()}.Validate().message(),
              HasSubstr("--restart-window-s"));
  const RestartPolicy inverted{.initial_backoff = absl::Seconds(2),
                               .max_backoff = absl::Seconds(1)};
  EXPECT_THAT(inverted.Validate().message(), HasSubstr("back-off"));
  EXPECT_TRUE(RestartPolicy{}.Validate().ok());
}

}  // namespace
}  // namespace splitspec::tools
