#include "target_worker/group_leader_model.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "target_worker/group_step_vote.h"

namespace splitspec::target {

// A rank-0 cache that knows its key and reports its release to the leader. Its
// rows live in `shard`, the shard model's own cache (device memory for a CUDA
// model), which the forward runs on; this object holds the length the engine
// sees (it truncates this one) and stores nothing itself.
class GroupLeaderModel::KeyedCache final : public model::KvCache {
 public:
  KeyedCache(std::unique_ptr<model::KvCache> shard, uint64_t key,
             std::vector<uint64_t>* released)
      : KvCache(shard->n_layers(), shard->kv_dim(), shard->max_tokens()),
        shard_(std::move(shard)),
        key_(key),
        released_(released) {}
  ~KeyedCache() override { released_->push_back(key_); }
  uint64_t key() const { return key_; }
  model::KvCache* shard() const { return shard_.get(); }
  model::MemorySpace memory_space() const override { return shard_->memory_space(); }
  uint64_t memory_bytes() const override { return shard_->memory_bytes(); }
  uint64_t bytes_per_position() const override { return shard_->bytes_per_position(); }
  uint64_t StorageBytes(int positions) const override { return shard_->StorageBytes(positions); }
  // The followers mirror a cache through the steps' truncations and tokens only.
  absl::Status KeepPath(int /*base*/, absl::Span<const int32_t> /*nodes*/) override {
    return absl::UnimplementedError(
        "tree drafts (KV cache keep path) are not implemented in a tensor-parallel group");
  }

 protected:
  // A reservation (a request's admission under a KV budget) is the shard's: this
  // object stores nothing, so its reserved positions are the shard's too.
  absl::Status GrowStorage(int capacity) override { return shard_->Reserve(capacity); }

 private:
  std::unique_ptr<model::KvCache> shard_;
  uint64_t key_;
  std::vector<uint64_t>* released_;
};

GroupLeaderModel::GroupLeaderModel(model::Transformer* model, net::Communicator* comm,
                                   absl::Duration keep_alive)
    : model_(model), comm_(comm), keep_alive_(keep_alive) {}

GroupLeaderModel::~GroupLeaderModel() = default;

std::unique_ptr<model::KvCache> GroupLeaderModel::NewCache(int max_tokens) const {
  // The shard model's own cache (its KV heads, its memory); allocation is lazy.
  auto* released = const_cast<std::vector<uint64_t>*>(&released_keys_);
  return std::make_unique<KeyedCache>(model_->NewCache(max_tokens), next_cache_key_++, released);
}

absl::Status GroupLeaderModel::Broadcast(proto::GroupStep& step) {
  if (!broken_.ok()) return broken_;
  step.set_step(next_step_++);
  for (uint64_t key : released_keys_) step.add_released_keys(key);
  released_keys_.clear();
  std::string bytes = step.SerializeAsString();
  absl::Status sent = net::BroadcastString(*comm_, &bytes, /*root=*/0);
  last_broadcast_ = absl::Now();
  if (!sent.ok()) broken_ = sent;
  return sent;
}

absl::Status GroupLeaderModel::Forward(absl::Span<const model::SequenceInput> batch,
                                       model::ForwardOutput* out) {
  if (!broken_.ok()) return broken_;
  proto::GroupStep step;
  std::vector<KeyedCache*> caches;
  std::vector<model::SequenceInput> shard_batch;
  for (const model::SequenceInput& input : batch) {
    if (!input.tree_parents.empty()) {  // a GroupStep carries no parents (yet)
      return absl::UnimplementedError(
          "tree drafts (a tree forward) are not implemented in a tensor-parallel group; "
          "verify chains there");
    }
    auto* cache = dynamic_cast<KeyedCache*>(input.cache);
    if (cache == nullptr) {
      return absl::InvalidArgumentError(
          "GroupLeaderModel::Forward: a cache did not come from this model's NewCache");
    }
    // Replays the engine's truncations on the shard cache (it is never shorter).
    RETURN_IF_ERROR(cache->shard()->Truncate(cache->length()));
    caches.push_back(cache);
    shard_batch.push_back({cache->shard(), input.tokens, input.logits});
    proto::GroupStepSequence* sequence = step.add_sequences();
    sequence->set_cache_key(cache->key());
    sequence->set_start(static_cast<uint32_t>(cache->length()));
    sequence->mutable_tokens()->Add(input.tokens.begin(), input.tokens.end());
    sequence->set_logits(static_cast<uint32_t>(input.logits));
    sequence->set_max_tokens(static_cast<uint32_t>(cache->max_tokens()));
    sequence->set_reserved(static_cast<uint32_t>(cache->reserved_positions()));
  }
  RETURN_IF_ERROR(Broadcast(step));
  // Every rank checks the step and the group agrees before any collective of the
  // forward: a rank that refuses (this one or a follower) makes every rank skip it.
  absl::Status agreed;
  if (absl::Status voted = AgreeOnStep(*comm_, step.step(), model_->PrepareForward(shard_batch),
                                       &agreed);
      !voted.ok()) {
    broken_ = voted;
    return broken_;
  }
  if (absl::IsDataLoss(agreed)) {
    broken_ = agreed;  // a follower cannot follow the plans: it leaves, the group re-forms
    return broken_;
  }
  if (!agreed.ok()) return agreed;  // every rank skipped the step: the group stays in step
  absl::Status forward = model_->Forward(shard_batch, out);
  // Every rank found the step runnable: a failure now is a failed collective or
  // device, and the group is broken.
  if (!forward.ok()) {
    broken_ = forward;
    return forward;
  }
  for (KeyedCache* cache : caches) {
    // The forward grew the shard: the same reservation here keeps the accounting
    // (reserved_positions, the KV budget) and the followers' mirrors in step.
    RETURN_IF_ERROR(cache->Reserve(cache->shard()->reserved_positions()));
    cache->Commit(cache->shard()->length());
  }
  return absl::OkStatus();
}

absl::Status GroupLeaderModel::KeepAliveIfIdle(absl::Time now) {
  if (!broken_.ok()) return broken_;
  if (now - last_broadcast_ < keep_alive_) return absl::OkStatus();
  proto::GroupStep step;
  return Broadcast(step);
}

void GroupLeaderModel::Leave(bool disband) {
  if (!broken_.ok()) return;
  proto::GroupStep step;
  step.set_leave(true);
  step.set_disband(disband);
  absl::Status sent = Broadcast(step);
  if (!sent.ok())
    SPLITSPEC_LOG(WARNING) << "tp group: telling the followers to leave failed: " << sent;
}

}  // namespace splitspec::target
