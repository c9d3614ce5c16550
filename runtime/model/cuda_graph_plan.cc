#include "runtime/model/cuda_graph_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::model {

absl::Status GraphBucketOptions::Validate() const {
  if (token_buckets.empty()) return absl::InvalidArgumentError("token_buckets is empty");
  for (size_t i = 0; i < token_buckets.size(); ++i) {
    if (token_buckets[i] < 1 || (i > 0 && token_buckets[i] <= token_buckets[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("token_buckets[", i, "] = ", token_buckets[i],
                                                     " (need >= 1 and increasing)"));
    }
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

int GraphBucketer::BucketFor(int tokens) const {
  for (int bucket : options_.token_buckets) {
    if (bucket >= tokens) return bucket;
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
  const int bucket_size = BucketFor(shape.tokens);
  if (shape.tokens < 1 || shape.max_tokens_per_sequence > options_.max_block_tokens ||
      bucket_size == 0) {
    return d;
  }
  Bucket& bucket = buckets_[bucket_size];
  bucket.last_used = ++clock_;
  if (bucket.eager_calls < options_.warmup_calls) {
    ++bucket.eager_calls;
    return d;
  }
  d.bucket_tokens = bucket_size;
  d.padding_tokens = bucket_size - shape.tokens;
  if (bucket.graph_id >= 0) {
    d.action = GraphAction::kReplay;
    d.graph_id = bucket.graph_id;
    return d;
  }
  if (static_cast<int>(live_.size()) >= options_.max_graphs) EvictLeastRecent(&d.evicted);
  d.action = GraphAction::kCapture;
  d.graph_id = bucket.graph_id = next_graph_id_++;
  live_[d.graph_id] = bucket_size;
  return d;
}

void GraphBucketer::Invalidate() {
  for (const auto& [id, size] : live_) {
    pending_evicted_.push_back(id);
    buckets_[size].graph_id = -1;
  }
  live_.clear();
}

}  // namespace splitspec::model
