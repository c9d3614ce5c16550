#include "runtime/model/cuda_graph_plan.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace splitspec::model {

namespace {

constexpr int kLargestPositionBucket = 48 * 1024;  // kCudaMaxAttentionPositions

absl::Status CheckBuckets(const char* name, const std::vector<int>& buckets) {
  if (buckets.empty()) return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] < 1 || (i > 0 && buckets[i] <= buckets[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", i, "] = ", buckets[i], " (need >= 1 and increasing)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GraphBucketOptions::Validate() const {
  if (absl::Status s = CheckBuckets("token_buckets", token_buckets); !s.ok()) return s;
  if (absl::Status s = CheckBuckets("position_buckets", position_buckets); !s.ok()) return s;
  if (position_buckets.back() > kLargestPositionBucket) {
    return absl::InvalidArgumentError(
        absl::StrCat("position_buckets ends at ", position_buckets.back(),
                     ", past the attention kernel's ", kLargestPositionBucket, " positions"));
  }
  if (max_block_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_block_tokens must be >= 1, got ", max_block_tokens));
  }
  if (max_graphs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_graphs must be >= 1, got ", max_graphs));
  }
  if (warmup_calls < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("warmup_calls must be >= 0, got ", warmup_calls));
  }
  return absl::OkStatus();
}

absl::StatusOr<GraphBucketer> GraphBucketer::Create(GraphBucketOptions options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  return GraphBucketer(std::move(options));
}

int GraphBucketer::BucketFor(const std::vector<int>& buckets, int value) {
  for (int bucket : buckets) {
    if (bucket >= value) return bucket;
  }
  return 0;
}

void GraphBucketer::EvictLeastRecent(std::vector<int64_t>* evicted) {
  auto oldest = live_.end();
  for (auto it = live_.begin(); it != live_.end(); ++it) {
    if (oldest == live_.end() ||
        buckets_[it->second].last_used < buckets_[oldest->second].last_used) {
      oldest = it;
    }
  }
  if (oldest == live_.end()) return;
  evicted->push_back(oldest->first);
  buckets_[oldest->second].graph_id = -1;
  live_.erase(oldest);
}

GraphDecision GraphBucketer::Decide(const GraphStepShape& shape) {
  GraphDecision d;
  d.evicted = std::move(pending_evicted_);
  pending_evicted_.clear();
  const int bucket_tokens = BucketFor(options_.token_buckets, shape.tokens);
  const int bucket_positions = BucketFor(options_.position_buckets, shape.max_positions);
  if (shape.tokens < 1 || shape.max_tokens_per_sequence > options_.max_block_tokens ||
      bucket_tokens == 0 || bucket_positions == 0) {
    return d;
  }
  const Key key{bucket_tokens, bucket_positions};
  Bucket& bucket = buckets_[key];
  bucket.last_used = ++clock_;
  if (bucket.eager_calls < options_.warmup_calls) {
    ++bucket.eager_calls;
    return d;
  }
  d.bucket_tokens = bucket_tokens;
  d.bucket_positions = bucket_positions;
  d.padding_tokens = bucket_tokens - shape.tokens;
  if (bucket.graph_id >= 0) {
    d.action = GraphAction::kReplay;
    d.graph_id = bucket.graph_id;
    return d;
  }
  if (static_cast<int>(live_.size()) >= options_.max_graphs) EvictLeastRecent(&d.evicted);
  d.action = GraphAction::kCapture;
  d.graph_id = bucket.graph_id = next_graph_id_++;
  live_[d.graph_id] = key;
  return d;
}

void GraphBucketer::Invalidate() {
  for (const auto& [id, key] : live_) {
    pending_evicted_.push_back(id);
    buckets_[key].graph_id = -1;
  }
  live_.clear();
}

}  // namespace splitspec::model
