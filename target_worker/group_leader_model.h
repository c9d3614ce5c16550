// GroupLeaderModel: the target leader's view of a tensor-parallel group as one
// LanguageModel. Before every forward it broadcasts the step's plan
// (proto::GroupStep) to the followers, which run the same forward on their
// shards (group_follower.h); the leader's TargetEngine never knows it is
// sharded.
//
//   GroupLeaderModel leader(tp_model.get(), comm.get());   // rank 0
//   TargetEngine engine(&leader, options);                 // as with a Transformer
//   ...  RETURN_IF_ERROR(leader.KeepAliveIfIdle(absl::Now()));   // in the idle loop
//   leader.Leave(/*disband=*/false);                        // on the way out
//
// Mirroring the KV caches: the caches NewCache hands out carry a key. A step
// names each sequence by key, with `start` = the leader's cache length before
// the step, so a follower first truncates its cache for that key to `start`
// (this replays every KvCache::Truncate the engine did since the last step)
// and then appends the same tokens. Caches destroyed on the leader are listed
// in the next step so followers free theirs. Each sequence also carries the
// leader cache's max_tokens and reserved positions, which the follower's cache
// takes too (an admission's reservation, target_engine.h): every rank's cache
// then holds the same positions, so the leader's KV budget holds per rank.
//
// Refusals: after the plan, every rank checks the step on its own shard
// (Transformer::PrepareForward) and the ranks agree (group_step_vote.h) before
// any collective of the forward. If any rank refuses (a cache out of room, a
// token out of range, a device out of memory), every rank skips the step and
// Forward returns the refusal (its code, naming the step and the rank); the
// group stays in step and the caches keep their lengths. A DataLoss refusal (a
// follower that cannot follow the plans, and leaves) breaks the group.
//
// The caches NewCache returns hold the shard model's own cache (device memory
// for a CUDA model), which the forward runs on.
//
// Tree drafts (SequenceInput::tree_parents, KvCache::KeepPath) are refused,
// Unimplemented and by name, before anything is broadcast: a GroupStep carries
// no parents and followers mirror caches by truncation only.
//
// Failure: a failed broadcast, agreement or forward breaks the group for good
// (the communicator's contract); status() then returns that error and every later
// Forward / KeepAliveIfIdle returns it. The owner re-forms the group.
//
// Thread safety: thread-compatible; the leader's service thread owns it. The
// caches it hands out must be destroyed before it.
#ifndef SPLITSPEC_TARGET_WORKER_GROUP_LEADER_MODEL_H_
#define SPLITSPEC_TARGET_WORKER_GROUP_LEADER_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/dist/communicator.h"
#include "runtime/model/language_model.h"
#include "runtime/model/transformer.h"

namespace splitspec::target {

class GroupLeaderModel : public model::LanguageModel {
 public:
  // `model` and `comm` (rank 0 of the group) must outlive this object.
  // keep_alive: how long the group may go without a broadcast before
  // KeepAliveIfIdle sends an empty step (well below the collective timeout, so
  // an idle follower's wait never times out, and a dead follower is noticed
  // while idle).
  GroupLeaderModel(model::Transformer* model, net::Communicator* comm,
                   absl::Duration keep_alive = absl::Seconds(1));
  ~GroupLeaderModel() override;

  const model::ModelConfig& config() const override { return model_->config(); }
  std::unique_ptr<model::KvCache> NewCache(int max_tokens = 0) const override;
  // REQUIRES: every cache in `batch` came from this object's NewCache.
  absl::Status Forward(absl::Span<const model::SequenceInput> batch,
                       model::ForwardOutput* out) override;
  // The leader's own shard model keeps the gathered logits on its device (one
  // block per rank, ForwardOutput's layout); the followers' are unaffected.
  // Errors: Transformer::KeepLogitsOnDevice's.
  absl::Status KeepLogitsOnDevice(bool keep) override { return model_->KeepLogitsOnDevice(keep); }
  int logits_device() const override { return model_->logits_device(); }
  // The leader's own shard model's.
  model::BackendCounters backend_counters() const override { return model_->backend_counters(); }

  // Sends an empty step if nothing was broadcast for keep_alive.
  absl::Status KeepAliveIfIdle(absl::Time now);
  // Tells the followers the leader is going: disband=false -> they wait for
  // the group to re-form; true -> they exit. Best effort (errors are logged).
  void Leave(bool disband);

  // OK while the group works; the first failure afterwards.
  const absl::Status& status() const { return broken_; }
  uint64_t steps() const { return next_step_; }

 private:
  class KeyedCache;
  absl::Status Broadcast(proto::GroupStep& step);

  model::Transformer* model_;
  net::Communicator* comm_;
  absl::Duration keep_alive_;
  absl::Time last_broadcast_ = absl::Now();
  uint64_t next_step_ = 0;
  mutable uint64_t next_cache_key_ = 1;
  std::vector<uint64_t> released_keys_;  // freed since the last broadcast
  absl::Status broken_;
};

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_GROUP_LEADER_MODEL_H_
