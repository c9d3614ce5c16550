// The CUDA graph bucketing policy (runtime/model/cuda_graph_plan.h), on the CPU:
// which calls get a graph, padded to which bucket, warm-up, replay, LRU eviction
// and invalidation.
#include "runtime/model/cuda_graph_plan.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

GraphBucketer MakeBucketer(GraphBucketOptions options = {}) {
  absl::StatusOr<GraphBucketer> b = GraphBucketer::Create(std::move(options));
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

TEST(GraphBucketerTest, DecodeAndVerifyStepsArePaddedToTheNextBucket) {
  GraphBucketOptions options;
  options.warmup_calls = 0;
  GraphBucketer b = MakeBucketer(options);
  // 5 sequences decoding one token each: bucket 8, 3 padded tokens.
  GraphDecision d = b.Decide({5, 5, 1, 100});
  EXPECT_EQ(d.action, GraphAction::kCapture);
  EXPECT_EQ(d.bucket_tokens, 8);
  EXPECT_EQ(d.padding_tokens, 3);
  // 3 verify blocks of k = 5: 18 tokens, bucket 32; a 1-token decode: bucket 1, no padding.
  d = b.Decide({18, 18, 6, 100});
  EXPECT_EQ(d.bucket_tokens, 32);
  EXPECT_EQ(d.padding_tokens, 14);
  d = b.Decide({1, 1, 1, 100});
  EXPECT_EQ(d.bucket_tokens, 1);
  EXPECT_EQ(d.padding_tokens, 0);
  EXPECT_EQ(b.live_graphs(), 3);
}

TEST(GraphBucketerTest, PrefillChunksAndOversizedCallsRunEagerly) {
  GraphBucketOptions options;
  options.warmup_calls = 0;
  GraphBucketer b = MakeBucketer(options);
  EXPECT_EQ(b.Decide({64, 1, 64, 100}).action, GraphAction::kEager);    // a prompt chunk
  EXPECT_EQ(b.Decide({18, 2, 18, 100}).action, GraphAction::kEager);    // one block longer than 17
  EXPECT_EQ(b.Decide({257, 257, 1, 100}).action, GraphAction::kEager);  // past the largest bucket
  EXPECT_EQ(b.Decide({0, 0, 0, 100}).action, GraphAction::kEager);
  const GraphDecision d = b.Decide({17, 17, 17, 100});  // the longest verify block still gets one
  EXPECT_EQ(d.action, GraphAction::kCapture);
  EXPECT_EQ(d.bucket_tokens, 32);
  EXPECT_EQ(b.live_graphs(), 1);
}

TEST(GraphBucketerTest, WarmsUpThenCapturesOnceThenReplays) {
  GraphBucketOptions options;
  options.warmup_calls = 2;
  GraphBucketer b = MakeBucketer(options);
  EXPECT_EQ(b.Decide({3, 3, 1, 100}).action, GraphAction::kEager);
  EXPECT_EQ(b.Decide({4, 4, 1, 100}).action, GraphAction::kEager);  // the same bucket (4)
  const GraphDecision capture = b.Decide({3, 3, 1, 100});
  EXPECT_EQ(capture.action, GraphAction::kCapture);
  for (int tokens : {3, 4, 4}) {
    const GraphDecision replay = b.Decide({tokens, tokens, 1, 100});
    EXPECT_EQ(replay.action, GraphAction::kReplay);
    EXPECT_EQ(replay.graph_id, capture.graph_id);
    EXPECT_EQ(replay.padding_tokens, 4 - tokens);
  }
  EXPECT_EQ(b.Decide({2, 2, 1, 100}).action, GraphAction::kEager);  // bucket 2 is still cold
}

TEST(GraphBucketerTest, EvictsTheLeastRecentlyUsedGraphPastTheCap) {
  GraphBucketOptions options;
  options.warmup_calls = 0;
  options.max_graphs = 2;
  GraphBucketer b = MakeBucketer(options);
  const int64_t g1 = b.Decide({1, 1, 1, 100}).graph_id;
  const int64_t g2 = b.Decide({2, 2, 1, 100}).graph_id;
  EXPECT_EQ(b.Decide({1, 1, 1, 100}).action, GraphAction::kReplay);  // 1 is now the more recent
  const GraphDecision d = b.Decide({4, 4, 1, 100});
  EXPECT_EQ(d.action, GraphAction::kCapture);
  EXPECT_THAT(d.evicted, ElementsAre(g2));
  EXPECT_EQ(b.live_graphs(), 2);
  EXPECT_EQ(b.Decide({1, 1, 1, 100}).graph_id, g1);
  const GraphDecision again = b.Decide({2, 2, 1, 100});  // captured anew under a new id
  EXPECT_EQ(again.action, GraphAction::kCapture);
  EXPECT_NE(again.graph_id, g2);
}

TEST(GraphBucketerTest, InvalidateEvictsEveryGraphAndRecapturesWarmBuckets) {
  GraphBucketer b = MakeBucketer();  // warmup_calls = 1
  EXPECT_EQ(b.Decide({8, 8, 1, 100}).action, GraphAction::kEager);
  const int64_t g = b.Decide({8, 8, 1, 100}).graph_id;
  b.Invalidate();
  EXPECT_EQ(b.live_graphs(), 0);
  const GraphDecision d = b.Decide({7, 7, 1, 100});
  EXPECT_EQ(d.action, GraphAction::kCapture);  // warm already: no second warm-up
  EXPECT_THAT(d.evicted, ElementsAre(g));
  EXPECT_NE(d.graph_id, g);
  EXPECT_THAT(b.Decide({8, 8, 1, 100}).evicted, IsEmpty());
}

TEST(GraphBucketerTest, TheLongestContextPicksThePositionBucket) {
  GraphBucketOptions options;
  options.warmup_calls = 0;
  GraphBucketer b = MakeBucketer(options);
  const GraphDecision short_context = b.Decide({4, 4, 1, 300});
  EXPECT_EQ(short_context.action, GraphAction::kCapture);
  EXPECT_EQ(short_context.bucket_positions, 512);
  // Same token bucket, a longer context: another graph, captured with P = 1024.
  const GraphDecision longer = b.Decide({4, 4, 1, 600});
  EXPECT_EQ(longer.action, GraphAction::kCapture);
  EXPECT_EQ(longer.bucket_positions, 1024);
  EXPECT_NE(longer.graph_id, short_context.graph_id);
  const GraphDecision replay = b.Decide({3, 3, 1, 1024});  // still within P = 1024
  EXPECT_EQ(replay.action, GraphAction::kReplay);
  EXPECT_EQ(replay.graph_id, longer.graph_id);
  EXPECT_EQ(b.Decide({4, 4, 1, 512}).graph_id, short_context.graph_id);
  EXPECT_EQ(b.Decide({4, 4, 1, 49153}).action, GraphAction::kEager);  // past the kernel's limit
  EXPECT_EQ(b.live_graphs(), 2);
}

TEST(GraphBucketerTest, RefusesBadOptionsByName) {
  GraphBucketOptions options;
  options.token_buckets = {1, 4, 4};
  EXPECT_THAT(GraphBucketer::Create(options).status().message(),
              HasSubstr("token_buckets[2] = 4 (need >= 1 and increasing)"));
  options = {};
  options.max_graphs = 0;
  EXPECT_THAT(GraphBucketer::Create(options).status().message(),
              HasSubstr("max_graphs must be >= 1, got 0"));
  options = {};
  options.max_block_tokens = 0;
  EXPECT_THAT(GraphBucketer::Create(options).status().message(), HasSubstr("max_block_tokens"));
  options = {};
  options.token_buckets.clear();
  EXPECT_THAT(GraphBucketer::Create(options).status().message(), HasSubstr("empty"));
  options = {};
  options.position_buckets = {1024, 65536};
  EXPECT_THAT(GraphBucketer::Create(options).status().message(),
              HasSubstr("position_buckets ends at 65536, past the attention kernel's 49152"));
  options = {};
  options.position_buckets = {0};
  EXPECT_THAT(GraphBucketer::Create(options).status().message(),
              HasSubstr("position_buckets[0] = 0"));
}

}  // namespace
}  // namespace splitspec::model
