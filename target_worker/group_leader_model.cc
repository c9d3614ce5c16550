#include "target_worker/group_leader_model.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"

namespace splitspec::target {

// A rank-0 cache that knows its key and reports its release to the leader.
class GroupLeaderModel::KeyedCache final : public model::KvCache {
 public:
  KeyedCache(const model::KvCache& shape, uint64_t key, std::vector<uint64_t>* released)
      : KvCache(shape.n_layers(), shape.kv_dim(), shape.max_tokens()),
        key_(key),
        released_(released) {}
  ~KeyedCache() override { released_->push_back(key_); }
  uint64_t key() const { return key_; }

 private:
  uint64_t key_;
  std::vector<uint64_t>* released_;
};

bool IsInputError(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsOutOfRange(status);
}

GroupLeaderModel::GroupLeaderModel(model::Transformer* model, net::Communicator* comm,
                                   absl::Duration keep_alive)
    : model_(model), comm_(comm), keep_alive_(keep_alive) {}

GroupLeaderModel::~GroupLeaderModel() = default;

std::unique_ptr<model::KvCache> GroupLeaderModel::NewCache(int max_tokens) const {
  // The shard's shape (its KV heads); allocation is lazy, so this costs nothing.
  std::unique_ptr<model::KvCache> shape = model_->NewCache(max_tokens);
  auto* released = const_cast<std::vector<uint64_t>*>(&released_keys_);
  return std::make_unique<KeyedCache>(*shape, next_cache_key_++, released);
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
  proto::GroupStep step;
  for (const model::SequenceInput& input : batch) {
    auto* cache = dynamic_cast<const KeyedCache*>(input.cache);
    if (cache == nullptr) {
      return absl::InvalidArgumentError(
          "GroupLeaderModel::Forward: a cache did not come from this model's NewCache");
    }
    proto::GroupStepSequence* sequence = step.add_sequences();
    sequence->set_cache_key(cache->key());
    sequence->set_start(static_cast<uint32_t>(cache->length()));
    sequence->mutable_tokens()->Add(input.tokens.begin(), input.tokens.end());
    sequence->set_logits(static_cast<uint32_t>(input.logits));
    sequence->set_max_tokens(static_cast<uint32_t>(cache->max_tokens()));
    sequence->set_reserved(static_cast<uint32_t>(cache->reserved_positions()));
  }
  RETURN_IF_ERROR(Broadcast(step));
  absl::Status forward = model_->Forward(batch, out);
  // Input errors (a cache out of room, a token out of range) are found before
  // any collective and identically by every rank, which all skip the step: the
  // group stays in step. Anything else is a failed collective.
  if (!forward.ok() && !IsInputError(forward)) broken_ = forward;
  return forward;
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
