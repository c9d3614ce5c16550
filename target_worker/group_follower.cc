#include "target_worker/group_follower.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/splitspec.pb.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "target_worker/group_leader_model.h"
#include "target_worker/group_step_vote.h"

namespace splitspec::target {
namespace {

using CacheMap = std::map<uint64_t, std::unique_ptr<model::KvCache>>;

// Builds the batch of one step, creating and truncating caches as planned.
absl::Status PrepareBatch(const proto::GroupStep& step, const model::Transformer& model,
                          CacheMap& caches, std::vector<model::SequenceInput>* batch) {
  for (const proto::GroupStepSequence& sequence : step.sequences()) {
    std::unique_ptr<model::KvCache>& cache = caches[sequence.cache_key()];
    if (cache == nullptr) {
      if (sequence.start() != 0) {
        return absl::DataLossError(
            absl::StrCat("tp step ", step.step(), ": cache key ", sequence.cache_key(),
                         " is unknown here but the leader's starts at ", sequence.start()));
      }
      cache = model.NewCache(static_cast<int>(sequence.max_tokens()));
    }
    // The leader reserved these positions (a request's admission, KV budget):
    // the same growth here keeps this rank's cache the size of the leader's.
    if (static_cast<int>(sequence.reserved()) > cache->reserved_positions()) {
      RETURN_IF_ERROR(
          cache->Reserve(std::min(static_cast<int>(sequence.reserved()), cache->max_tokens())));
    }
    if (static_cast<int>(sequence.start()) > cache->length()) {
      return absl::DataLossError(absl::StrCat(
          "tp step ", step.step(), ": cache key ", sequence.cache_key(), " has ", cache->length(),
          " positions here, the leader's step starts at ", sequence.start()));
    }
    RETURN_IF_ERROR(cache->Truncate(static_cast<int>(sequence.start())));
    if (sequence.logits() > static_cast<uint32_t>(model::LogitsMode::kAll)) {
      return absl::DataLossError(
          absl::StrCat("tp step ", step.step(), ": logits mode ", sequence.logits()));
    }
    batch->push_back(
        {.cache = cache.get(),
         .tokens = absl::MakeConstSpan(sequence.tokens().data(), sequence.tokens().size()),
         .logits = static_cast<model::LogitsMode>(sequence.logits())});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FollowerExit> RunGroupFollower(model::Transformer& model, net::Communicator& comm,
                                              const std::atomic<bool>& stop,
                                              FollowerCounters* counters) {
  FollowerCounters local;
  if (counters == nullptr) counters = &local;
  CacheMap caches;
  model::ForwardOutput out;
  uint64_t expected_step = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    std::string bytes;
    RETURN_IF_ERROR(net::BroadcastString(comm, &bytes, /*root=*/0));
    proto::GroupStep step;
    if (!step.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat("tp step after ", expected_step,
                                              ": unparsable plan of ", bytes.size(), " bytes"));
    }
    if (step.step() != expected_step) {
      return absl::DataLossError(
          absl::StrCat("tp step ", step.step(), " arrived, expected ", expected_step));
    }
    ++expected_step;
    ++counters->steps;
    for (uint64_t key : step.released_keys()) caches.erase(key);
    if (step.leave()) return step.disband() ? FollowerExit::kDisbanded : FollowerExit::kLeaderLeft;
    if (step.sequences_size() == 0) continue;  // keep-alive
    std::vector<model::SequenceInput> batch;
    absl::Status local = PrepareBatch(step, model, caches, &batch);
    if (local.ok()) local = model.PrepareForward(batch);
    // Every rank's verdict before any collective of the forward (group_step_vote.h).
    absl::Status agreed;
    RETURN_IF_ERROR(AgreeOnStep(comm, step.step(), local, &agreed));
    if (absl::IsDataLoss(local)) return local;  // the plans went out of step: re-form
    if (!agreed.ok()) {
      if (!local.ok()) SPLITSPEC_LOG(WARNING) << agreed;  // this rank refused: say why
      continue;                                          // every rank skips the step
    }
    RETURN_IF_ERROR(model.Forward(batch, &out));
    ++counters->forwards;
    for (const proto::GroupStepSequence& sequence : step.sequences())
      counters->tokens += sequence.tokens_size();
    counters->reserved_positions = 0;
    for (const auto& [key, cache] : caches)
      counters->reserved_positions += cache->reserved_positions();
  }
  return FollowerExit::kStopped;
}

}  // namespace splitspec::target
