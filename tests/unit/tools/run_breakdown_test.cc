// BreakdownFromTrace over hand-made events: per-block intervals matched by block
// sequence, the first block's prefill wait left out, idle and step totals.
#include "tools/run_breakdown.h"

#include <vector>

#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

const absl::Time kOrigin = absl::FromUnixSeconds(1000);

absl::Time Ms(double ms) { return kOrigin + absl::Microseconds(1000 * ms); }

TraceEvent Mark(const std::string& track, const std::string& name, double at_ms) {
  return {track, name, Ms(at_ms), Ms(at_ms)};
}

TraceEvent Span(const std::string& track, const std::string& name, double from_ms, double to_ms) {
  return {track, name, Ms(from_ms), Ms(to_ms)};
}

// Two blocks, sequential: block 1 waits for a 50 ms prefill; block 2 is sent 3 ms
// after result 1 and verified at once.
std::vector<TraceEvent> TwoBlocks() {
  return {
      Span("target", "verify step", 0, 50),
      Span("target.steps", "undecided", 0, 50),  // the prompt
      Mark("block", "sent 1", 1),
      Mark("block", "received 1", 50),
      Span("target", "verify step", 50, 60),
      Span("block", "verified 1", 50, 60),
      Mark("block", "result 1", 60.5),
      Span("draft", "draft step", 60.5, 63.5),
      Span("target.idle", "wait", 60, 63.6),
      Mark("block", "sent 2", 63.5),
      Mark("block", "received 2", 63.6),
      Span("target", "verify step", 63.7, 73.7),
      Span("block", "verified 2", 63.7, 73.7),
      Mark("block", "result 2", 73.9),
      Span("draft", "pre-draft", 74, 75),
      Span("draft.idle", "wait", 75, 80),
      Span("sim", "late", 63.4, 63.5),
      Mark("block", "sent 3", 80),  // stale: never received nor verified
  };
}

TEST(RunBreakdownTest, MatchesEachBlocksEventsBySequence) {
  const RunBreakdown b = BreakdownFromTrace(TwoBlocks());
  EXPECT_EQ(b.verify.count, 2);
  EXPECT_NEAR(b.verify.Mean(), 0.010, 1e-9);
  // Transit and queue: block 2 only (block 1 waited for the prefill).
  EXPECT_EQ(b.transit.count, 1);
  EXPECT_NEAR(b.transit.Mean(), 0.0001, 1e-9);
  EXPECT_EQ(b.queued.count, 1);
  EXPECT_NEAR(b.queued.Mean(), 0.0001, 1e-9);
  // Result trips: 0.5 ms and 0.2 ms; turnaround: result 1 -> sent 2 (3 ms), result 2 ->
  // sent 3 (6.1 ms).
  EXPECT_EQ(b.result_trip.count, 2);
  EXPECT_NEAR(b.result_trip.Mean(), 0.00035, 1e-9);
  EXPECT_EQ(b.turnaround.count, 2);
  EXPECT_NEAR(b.turnaround.Mean(), (0.003 + 0.0061) / 2, 1e-9);
}

TEST(RunBreakdownTest, SumsStepsIdleWaitsAndTheSimDraftersLateness) {
  RunBreakdown b = BreakdownFromTrace(TwoBlocks());
  EXPECT_EQ(b.steps.count, 3);
  EXPECT_EQ(b.undecided.count, 1);
  EXPECT_NEAR(b.target_idle.seconds, 0.0036, 1e-9);
  EXPECT_EQ(b.draft_steps.count, 1);
  EXPECT_EQ(b.pre_draft.count, 1);
  EXPECT_NEAR(b.draft_idle.seconds, 0.005, 1e-9);
  EXPECT_NEAR(b.sim_late.seconds, 0.0001, 1e-9);
  // Runs merge by adding sums and counts.
  b.Merge(BreakdownFromTrace(TwoBlocks()));
  EXPECT_EQ(b.verify.count, 4);
  EXPECT_NEAR(b.verify.Mean(), 0.010, 1e-9);
  EXPECT_EQ(b.steps.count, 6);
  EXPECT_NE(FormatBreakdown(b).find("blocks 4:"), std::string::npos) << FormatBreakdown(b);
}

TEST(RunBreakdownTest, AnEmptyTraceGivesZeros) {
  const RunBreakdown b = BreakdownFromTrace({});
  EXPECT_EQ(b.verify.count, 0);
  EXPECT_EQ(b.verify.Mean(), 0.0);
  EXPECT_NE(FormatBreakdown(b).find("blocks 0:"), std::string::npos);
}

// What the services record reaches the breakdown through Tracer::Events.
TEST(RunBreakdownTest, ReadsTheGlobalTracersEvents) {
  Tracer& tracer = Tracer::Global();
  tracer.Enable();
  tracer.Clear();
  tracer.Mark("block", "sent 1", Ms(0));
  tracer.Mark("block", "sent 2", Ms(1));
  tracer.Mark("block", "received 2", Ms(1.5));
  tracer.Record("block", "verified 2", Ms(2), Ms(12));
  const std::vector<TraceEvent> events = tracer.Events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].name, "sent 1");
  EXPECT_EQ(events[0].start, events[0].end) << "a mark is an instant";
  const RunBreakdown b = BreakdownFromTrace(events);
  EXPECT_NEAR(b.transit.Mean(), 0.0005, 1e-9);
  EXPECT_NEAR(b.queued.Mean(), 0.0005, 1e-9);
  EXPECT_NEAR(b.verify.Mean(), 0.010, 1e-9);
  tracer.Clear();
  EXPECT_TRUE(tracer.Events().empty());
}

}  // namespace
}  // namespace splitspec::tools
