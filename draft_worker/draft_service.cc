#include "draft_worker/draft_service.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/net/wire_format.h"

namespace splitspec::draft {

absl::StatusOr<std::unique_ptr<DraftService>> DraftService::Create(spec::Drafter* drafter,
                                                                   DraftServiceOptions options) {
  options.identity.role = proto::ROLE_DRAFT_WORKER;
  ASSIGN_OR_RETURN(proto::Register registration, net::BuildRegistration(options.identity));
  registration.mutable_capabilities()->add_drafters(std::string(drafter->name()));
  registration.mutable_capabilities()->set_max_sequences(options.engine.max_requests);
  ASSIGN_OR_RETURN(std::unique_ptr<worker::WorkerSkeleton> skeleton,
                   worker::WorkerSkeleton::Connect(options.coordinator_endpoint, registration));
  return std::unique_ptr<DraftService>(
      new DraftService(drafter, std::move(options), std::move(skeleton)));
}

DraftService::DraftService(spec::Drafter* drafter, DraftServiceOptions options,
                           std::unique_ptr<worker::WorkerSkeleton> skeleton)
    : options_(std::move(options)),
      skeleton_(std::move(skeleton)),
      drafter_(drafter),
      engine_(drafter, options_.engine) {}

absl::Status DraftService::Run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed) && !skeleton_->drain_requested()) {
    const absl::Time now = absl::Now();
    RETURN_IF_ERROR(skeleton_->Tick(now));
    skeleton_->DispatchControl(*this);
    DrainTargets();
    requests_released_.store(engine_.counters().requests_released, std::memory_order_release);
    ReportLoad();
    if (engine_.HasWork()) {
      std::vector<OutgoingBlock> blocks;
      const absl::Time step_start = Tracer::Global().enabled() ? absl::Now() : absl::Time();
      const absl::Status step = engine_.Step(&blocks);
      if (Tracer::Global().enabled()) {
        // A step that sends nothing pre-drafted for the speculation cache.
        Tracer::Global().Record("draft", blocks.empty() ? "pre-draft" : "draft step", step_start,
                                absl::Now());
      }
      if (!step.ok()) SPLITSPEC_LOG(ERROR) << "draft step failed: " << step;
      SendBlocks(blocks);
      continue;
    }
    std::vector<net::Channel*> channels = {&skeleton_->control_channel()};
    for (auto& [endpoint, channel] : targets_) channels.push_back(channel.get());
    const absl::Time wake = skeleton_->NextWake(now);
    const absl::Time idle_start = absl::Now();
    net::WaitAnyReadable(channels, std::max(wake - idle_start, absl::ZeroDuration()));
    if (Tracer::Global().enabled() && engine_.active_requests() > 0)
      Tracer::Global().Record("draft.idle", "wait", idle_start, absl::Now());
  }
  return skeleton_->Leave(absl::StrCat("draft worker '", options_.identity.name, "' (",
                                       engine_.active_requests(),
                                       " request(s) left, all handed over)"));
}

void DraftService::ReportLoad() {
  const spec::SpeculationCacheCounters cache = engine_.cache_counters();
  proto::LoadReport load;
  load.set_active_requests(static_cast<uint32_t>(engine_.active_requests()));
  load.set_spec_cache_lookups(cache.lookups);
  load.set_spec_cache_hits(cache.hits + cache.partial_hits);
  load.set_spec_cache_partial_hits(cache.partial_hits);
  load.set_spec_cache_drafted_tokens(cache.drafted_tokens);
  load.set_spec_cache_unplanned_blocks(cache.unplanned_blocks);
  if (const model::KvBudget* kv = drafter_->kv_budget(); kv != nullptr) {
    load.set_kv_cache_used_bytes(kv->used_bytes());
    load.set_kv_cache_budget_bytes(kv->budget_bytes());
    load.set_kv_cache_preemptions(kv->counters().preemptions);
  }
  skeleton_->membership().set_load(load);
}

void DraftService::SendBlocks(std::vector<OutgoingBlock>& blocks) {
  for (OutgoingBlock& outgoing : blocks) {
    absl::StatusOr<net::Channel*> channel = TargetChannel(outgoing.target_endpoint);
    if (!channel.ok()) {
      SPLITSPEC_LOG(WARNING) << channel.status();
      continue;
    }
    proto::Envelope envelope = net::NewEnvelope();
    *envelope.mutable_draft_block() = std::move(outgoing.block);
    if (Tracer::Global().enabled()) {
      Tracer::Global().Mark("block", absl::StrCat("sent ", envelope.draft_block().block_sequence()),
                            absl::Now());
    }
    (void)(*channel)->Send("", envelope);
  }
}

absl::StatusOr<net::Channel*> DraftService::TargetChannel(const std::string& endpoint,
                                                          const std::string& server_key) {
  auto it = targets_.find(endpoint);
  if (it != targets_.end() && (server_key.empty() || target_keys_[endpoint] == server_key))
    return it->second.get();
  net::MembershipClient& membership = skeleton_->membership();
  if (!membership.registered()) return absl::UnavailableError("not registered yet");
  // A target's data port holds that target's key (channel_security.h): the
  // coordinator names it in the assignment; the shared target key otherwise.
  const net::ChannelSecurity security = net::DefaultChannelSecurity();
  const std::string key = server_key.empty() ? security.target_public_key : server_key;
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> channel,
                   net::ConnectChannel(endpoint, net::DraftPeerName(membership.worker_id()),
                                       security, key));
  if (options_.data_faults.has_value()) {
    channel =
        std::make_unique<net::FaultInjectingChannel>(std::move(channel), *options_.data_faults);
  }
  net::Channel* raw = channel.get();
  targets_[endpoint] = std::move(channel);
  target_keys_[endpoint] = key;
  return raw;
}

absl::Status DraftService::Assign(const proto::Assignment& assignment) {
  RETURN_IF_ERROR(engine_.AddRequest(assignment));
  return TargetChannel(assignment.target_endpoint(), assignment.target_worker_key()).status();
}

void DraftService::DrainTargets() {
  for (auto& [endpoint, channel] : targets_) {
    while (channel->Readable()) {
      absl::StatusOr<net::Frame> frame = channel->Receive(absl::ZeroDuration());
      if (!frame.ok()) break;
      if (!frame->envelope.has_verify_result()) continue;
      const proto::VerifyResult& result = frame->envelope.verify_result();
      if (Tracer::Global().enabled() && result.block_sequence() > 0) {
        Tracer::Global().Mark("block", absl::StrCat("result ", result.block_sequence()),
                              absl::Now());
      }
      if (engine_.OnResult(result) == ResultAction::kNeedSync) {
        proto::Envelope sync = net::NewEnvelope();
        sync.mutable_sync_request()->set_request_id(result.request_id());
        sync.mutable_sync_request()->set_known_frontier(
            static_cast<uint32_t>(std::max(0, engine_.KnownFrontier(result.request_id()))));
        (void)channel->Send("", sync);
      }
    }
  }
}

}  // namespace splitspec::draft
