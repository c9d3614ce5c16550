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
  GraphDecision d = b.Decide({5, 5, 1});
  EXPECT_EQ(d.action, GraphAction::kCapture);
  EXPECT_EQ(d.bucket_tokens, 8);
  EXPECT_EQ(d.padding_tokens, 3);
  // 3 verify blocks of k = 5: 18 tokens, bucket 32; a 1-token decode: bucket 1, no padding.
  d = b.Decide({18, 18, 6});
  EXPECT_EQ(d.bucket_tokens, 32);
  EXPECT_EQ(d.padding_tokens, 14);
  d = b.Decide({1, 1, 1});
  EXPECT_EQ(d.bucket_tokens, 1);
  EXPECT_EQ(d.padding_tokens, 0);
  EXPECT_EQ(b.live_graphs(), 3);
}

TEST(GraphBucketerTest, PrefillChunksAndOversizedCallsRunEagerly) {
  GraphBucketOptions options;
  options.warmup_calls = 0;
  GraphBucketer b = MakeBucketer(options);
  EXPECT_EQ(b.Decide({64, 1, 64}).action, GraphAction::kEager);    // a prompt chunk
  EXPECT_EQ(b.Decide({18, 2, 18}).action, GraphAction::kEager);    // one block longer than 17
  EXPECT_EQ(b.Decide({257, 257, 1}).action, GraphAction::kEager);  // past the largest bucket
  EXPECT_EQ(b.Decide({0, 0, 0}).action, GraphAction::kEager);
  const GraphDecision d = b.Decide({17, 17, 17});  // the longest verify block still gets one
  EXPECT_EQ(d.action, GraphAction::kCapture);
  EXPECT_EQ(d.bucket_tokens, 32);
  EXPECT_EQ(b.live_graphs(), 1);
}

TEST(GraphBucketerTest, WarmsUpThenCapturesOnceThenReplays) {
  GraphBucketOptions options;
  options.warmup_calls = 2;
  GraphBucketer b = MakeBucketer(options);
  EXPECT_EQ(b.Decide({3, 3, 1}).action, GraphAction::kEager);
  EXPECT_EQ(b.Decide({4, 4, 1}).action, GraphAction::kEager);  // the same bucket (4)
  const GraphDecision capture = b.Decide({3, 3, 1});
  EXPECT_EQ(capture.action, GraphAction::kCapture);
  for (int tokens : {3, 4, 4}) {
    const GraphDecision replay = b.Decide({tokens, tokens, 1});
    EXPECT_EQ(replay.action, GraphAction::kReplay);
    EXPECT_EQ(replay.graph_id, capture.graph_id);
    EXPECT_EQ(replay.padding_tokens, 4 - tokens);
  }
  EXPECT_EQ(b.Decide({2, 2, 1}).action, GraphAction::kEager);  // bucket 2 is still cold
}

TEST(GraphBucketerTest, EvictsTheLeastRecentlyUsedGraphPastTheCap) {
  GraphBucketOptions options;
  options.warmup_calls = 0;
  options.max_graphs = 2;
  GraphBucketer b = MakeBucketer(options);
  const int64_t g1 = b.Decide({1, 1, 1}).graph_id;
  const int64_t g2 = b.Decide({2, 2, 1}).graph_id;
  EXPECT_EQ(b.Decide({1, 1, 1}).action, GraphAction::kReplay);  // 1 is now the more recent
  const GraphDecision d = b.Decide({4, 4, 1});
  EXPECT_EQ(d.action, GraphAction::kCapture);
  EXPECT_THAT(d.evicted, ElementsAre(g2));
  EXPECT_EQ(b.live_graphs(), 2);
  EXPECT_EQ(b.Decide({1, 1, 1}).graph_id, g1);
  const GraphDecision again = b.Decide({2, 2, 1});  // captured anew under a new id
  EXPECT_EQ(again.action, GraphAction::kCapture);
  EXPECT_NE(again.graph_id, g2);
}

TEST(GraphBucketerTest, InvalidateEvictsEveryGraphAndRecapturesWarmBuckets) {
  GraphBucketer b = MakeBucketer();  // warmup_calls = 1
  EXPECT_EQ(b.Decide({8, 8, 1}).action, GraphAction::kEager);
  const int64_t g = b.Decide({8, 8, 1}).graph_id;
  b.Invalidate();
  EXPECT_EQ(b.live_graphs(), 0);
  const GraphDecision d = b.Decide({7, 7, 1});
  EXPECT_EQ(d.action, GraphAction::kCapture);  // warm already: no second warm-up
  EXPECT_THAT(d.evicted, ElementsAre(g));
  EXPECT_NE(d.graph_id, g);
  EXPECT_THAT(b.Decide({8, 8, 1}).evicted, IsEmpty());
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
}

}  // namespace
}  // namespace splitspec::model
