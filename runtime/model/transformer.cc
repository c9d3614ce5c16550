#include "runtime/model/transformer.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/cpu_backend.h"

#if defined(SPLITSPEC_HAVE_CUDA)
#include "runtime/model/cuda_backend.h"
#endif

namespace splitspec::model {
namespace {

// How many rows of logits a sequence asks for: those of its last LogitRows tokens.
int LogitRows(const SequenceInput& in) {
  switch (in.logits) {
    case LogitsMode::kNone:
      return 0;
    case LogitsMode::kLast:
      return 1;
    case LogitsMode::kAll:
      break;
  }
  return static_cast<int>(in.tokens.size());
}

// The logits' layout: each sequence's rows in batch order (plan.logit_tokens').
void LayOutRows(absl::Span<const SequenceInput> batch, ForwardOutput* out) {
  out->first_row.resize(batch.size());
  out->num_rows.resize(batch.size());
  int rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    out->first_row[s] = rows;
    out->num_rows[s] = LogitRows(batch[s]);
    rows += out->num_rows[s];
  }
}

// Whether the CUDA backend computes this model: the Llama shape only (model_config.h).
bool CudaBackendRuns(const ModelConfig& c) {
  return c.embedding_scale == 1.f && !c.qk_norm && !c.post_norms && c.sliding_window == 0 &&
         c.activation == FeedForwardActivation::kSilu && c.attention_scale == 0.f;
}

}  // namespace

Transformer::Transformer(std::unique_ptr<GgufFile> file, ModelConfig config,
                         std::unique_ptr<ModelWeights> weights, TensorParallelShard shard,
                         net::Communicator* group, int threads)
    : file_(std::move(file)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      shard_(shard),
      shard_weights_(ShardWeights(*weights_, shard_, config_)),
      group_(group),
      threads_(threads > 0 ? threads : ThreadPool::DefaultThreads()) {}

absl::Status Transformer::AttachBackend(const TransformerOptions& options) {
  device_ = options.device;
  if (!device_.is_cuda()) {
    if (group_ != nullptr && group_->buffer_space() != net::BufferSpace::kHost) {
      return absl::FailedPreconditionError(
          absl::StrCat("the CPU transformer backend needs a host-memory communicator (Gloo), got ",
                       group_->backend_name()));
    }
    InterleaveForCpu(shard_weights_.get());
    if (options.kv_cache_type == KvCacheType::kQ8_0 &&
        (config_.head_dim % kernels::kQ8BlockValues != 0 || config_.head_dim > 256)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kv-cache-type q8_0 needs a head dimension that is a multiple of 32 and at most 256; ",
          "this model's is ", config_.head_dim));
    }
    backend_ = std::make_unique<CpuBackend>(config_, shard_, *shard_weights_, threads_,
                                            options.kv_cache_type);
    return absl::OkStatus();
  }
  if (options.kv_cache_type != KvCacheType::kF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        device_.ToString(), ": --kv-cache-type ", KvCacheTypeName(options.kv_cache_type),
        " is CPU only (the CUDA backend stores its KV cache as f16)"));
  }
  if (!CudaBackendRuns(config_)) {
    return absl::UnimplementedError(absl::StrCat(
        device_.ToString(), ": the CUDA backend does not implement the ", config_.architecture,
        " architecture (sliding-window attention, Q/K and post norms, GeGLU, embedding scale); "
        "run it on the CPU"));
  }
  const DeviceMemoryNeed need =
      EstimateDeviceMemory(config_, shard_, *shard_weights_, options.memory);
  RETURN_IF_ERROR(CheckDeviceFits(device_, need, SystemDeviceProbe()));
  if (shard_.size > 1 &&
      (group_ == nullptr || group_->buffer_space() != net::BufferSpace::kDevice)) {
    return absl::FailedPreconditionError(absl::StrCat(
        device_.ToString(), ": a tensor-parallel group (", shard_.size,
        " ranks) on a CUDA device needs a device-memory communicator (NCCL, or Gloo staged "
        "through the host), got ",
        group_ == nullptr ? "none" : group_->backend_name()));
  }
#if defined(SPLITSPEC_HAVE_CUDA)
  ASSIGN_OR_RETURN(backend_, NewCudaBackend(config_, shard_, *shard_weights_, device_.ordinal,
                                            options.memory, options.cuda_graphs));
  return absl::OkStatus();
#else
  return absl::InternalError("unreachable: CheckDeviceFits passed a CUDA device without CUDA");
#endif
}

Transformer::~Transformer() = default;

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Load(const std::string& path,
                                                               const TransformerOptions& options) {
  return Load(path, nullptr, options);
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::FromFile(
    std::unique_ptr<GgufFile> file, const TransformerOptions& options) {
  return FromFile(std::move(file), nullptr, options);
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Load(const std::string& path,
                                                               net::Communicator* group,
                                                               const TransformerOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return FromFile(std::move(file), group, options);
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::FromFile(
    std::unique_ptr<GgufFile> file, net::Communicator* group, const TransformerOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, ReadModelConfig(*file));
  if (options.layers < 0 || options.layers > config.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layers = ", options.layers, " outside [0, ",
                                                   config.n_layers, "] for ", file->path()));
  }
  if (options.layers > 0) config.n_layers = options.layers;
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(*file, config));
  auto full = std::make_unique<ModelWeights>(std::move(weights));
  const int size = group == nullptr ? 1 : group->size();
  const int rank = group == nullptr ? 0 : group->rank();
  ASSIGN_OR_RETURN(TensorParallelShard shard, PlanTensorParallelShard(config, *full, size, rank));
  std::unique_ptr<Transformer> model(new Transformer(
      std::move(file), std::move(config), std::move(full), shard, group, options.threads));
  RETURN_IF_ERROR(model->AttachBackend(options));
  return model;
}

std::unique_ptr<KvCache> Transformer::NewCache(int max_tokens) const {
  return backend_->NewCache(max_tokens > 0 ? max_tokens : config_.context_length);
}

absl::Status Transformer::CheckCacheShape(size_t s, const KvCache& cache) const {
  const int64_t kv_dim = shard_.kv_dim(config_);
  if (cache.memory_space() != backend_->memory_space()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", s, ": KV cache in ",
                     cache.memory_space() == MemorySpace::kHost ? "host" : "device",
                     " memory, the model runs on ", device_.ToString()));
  }
  if (cache.n_layers() == config_.n_layers && cache.kv_dim() == kv_dim) return absl::OkStatus();
  const std::string needs = shard_.size == 1
                                ? std::string("model needs")
                                : absl::StrCat("tensor-parallel rank ", shard_.rank, " needs");
  return absl::InvalidArgumentError(
      absl::StrCat("sequence ", s, ": KV cache shaped for ", cache.n_layers(), " layers x ",
                   cache.kv_dim(), ", ", needs, " ", config_.n_layers, " x ", kv_dim));
}

absl::Status Transformer::ValidateTree(size_t s, const SequenceInput& in) const {
  const absl::Span<const int32_t> parents = in.tree_parents;
  if (parents.empty()) return absl::OkStatus();
  if (device_.is_cuda()) {
    return absl::UnimplementedError(absl::StrCat(
        "sequence ", s, ": tree drafts (a tree forward) are not implemented on the CUDA backend (",
        device_.ToString(), "); verify chains there"));
  }
  if (shard_.size > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "sequence ", s, ": tree drafts (a tree forward) are not implemented in a tensor-parallel "
        "group (", shard_.size, " ranks); verify chains there"));
  }
  if (in.cache->type() == KvCacheType::kQ8_0) {
    return absl::UnimplementedError(absl::StrCat(
        "sequence ", s, ": tree drafts (a tree forward) are not implemented over a q8_0 KV cache "
        "(--kv-cache-type q8_0); verify chains (--tree off) or use --kv-cache-type f16"));
  }
  if (parents.size() != in.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": ", parents.size(),
                                                   " tree parents for ", in.tokens.size(),
                                                   " tokens (one parent per token)"));
  }
  if (parents[0] != -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence ", s, ": tree_parents[0] = ", parents[0], ", the root's parent must be -1"));
  }
  for (size_t i = 1; i < parents.size(); ++i) {
    if (parents[i] < 0 || parents[i] >= static_cast<int64_t>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s, ": tree_parents[", i, "] = ", parents[i], " outside [0, ",
                       i, ") (a parent comes before its children)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Transformer::Validate(absl::Span<const SequenceInput> batch) const {
  if (batch.empty()) return absl::InvalidArgumentError("forward needs at least one sequence");
  absl::flat_hash_set<const KvCache*> seen;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    if (in.cache == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no KV cache"));
    }
    RETURN_IF_ERROR(CheckCacheShape(s, *in.cache));
    if (!seen.insert(in.cache).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s, ": KV cache also used by an earlier sequence"));
    }
    if (in.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no tokens"));
    }
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      if (in.tokens[i] < 0 || in.tokens[i] >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token ", i, " = ",
                                                       in.tokens[i], " outside the vocabulary [0, ",
                                                       config_.vocab_size, ")"));
      }
    }
    RETURN_IF_ERROR(ValidateTree(s, in));
    const int64_t new_length = static_cast<int64_t>(in.cache->length()) + in.tokens.size();
    if (new_length > in.cache->max_tokens()) {
      return absl::OutOfRangeError(absl::StrCat("sequence ", s, ": ", new_length,
                                                " tokens exceed the KV cache limit of ",
                                                in.cache->max_tokens()));
    }
  }
  return absl::OkStatus();
}

absl::Status Transformer::PrepareForward(absl::Span<const SequenceInput> batch) {
  RETURN_IF_ERROR(Validate(batch));
  // Reserving only grows capacity; lengths stay as they were until Forward commits.
  for (const SequenceInput& in : batch) {
    RETURN_IF_ERROR(in.cache->Reserve(in.cache->length() + static_cast<int>(in.tokens.size())));
  }
  return absl::OkStatus();
}

absl::Status Transformer::Forward(absl::Span<const SequenceInput> batch, ForwardOutput* out) {
  RETURN_IF_ERROR(PrepareForward(batch));
  PlanTokens(batch);
  absl::Status status = RunPlan(out);
  // A failed CUDA graph capture ran none of the call's kernels and left the caches'
  // lengths as they were: the same plan runs again, eagerly (backend.h).
  if (!status.ok() && backend_->RetryEagerly()) status = RunPlan(out);
  RETURN_IF_ERROR(status);
  LayOutRows(batch, out);
  for (const SequenceInput& in : batch) {
    in.cache->Commit(in.cache->length() + static_cast<int>(in.tokens.size()));
  }
  return absl::OkStatus();
}

void Transformer::PlanTokens(absl::Span<const SequenceInput> batch) {
  plan_.batch = batch;
  plan_.token_seq.clear();
  plan_.token_pos.clear();
  plan_.token_slot.clear();
  plan_.logit_tokens.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    const int n = static_cast<int>(batch[s].tokens.size());
    const int first_logit = n - LogitRows(batch[s]);
    const int length = batch[s].cache->length();
    const absl::Span<const int32_t> parents = batch[s].tree_parents;
    const size_t first = plan_.token_seq.size();
    for (int i = 0; i < n; ++i) {
      if (i >= first_logit) plan_.logit_tokens.push_back(plan_.token_seq.size());
      plan_.token_seq.push_back(static_cast<int>(s));
      plan_.token_slot.push_back(length + i);
      // A tree node sits one position after its parent (parents come first).
      plan_.token_pos.push_back(parents.empty() || i == 0 ? length + i
                                                          : plan_.token_pos[first + parents[i]] + 1);
    }
  }
  plan_.max_positions = *std::max_element(plan_.token_pos.begin(), plan_.token_pos.end()) + 1;
}

absl::Status Transformer::RunPlan(ForwardOutput* out) {
  backend_->Begin(plan_);
  for (int layer = 0; layer < config_.n_layers; ++layer) RETURN_IF_ERROR(RunLayer(layer));
  RETURN_IF_ERROR(ComputeLogits(out));
  return backend_->Finish();
}

absl::Status Transformer::SumOverGroup(float* data, int64_t count) {
  if (shard_.size == 1) return absl::OkStatus();
  backend_->CompleteBuffers();
  return group_->AllReduceSum(data, count);
}

absl::Status Transformer::RunLayer(int layer) {
  const int64_t count = static_cast<int64_t>(plan_.token_seq.size()) * config_.n_embd;
  RETURN_IF_ERROR(SumOverGroup(backend_->Attention(layer), count));
  backend_->AddToResidual();
  RETURN_IF_ERROR(SumOverGroup(backend_->FeedForward(layer), count));
  backend_->AddToResidual();
  return absl::OkStatus();
}

absl::Status Transformer::KeepLogitsOnDevice(bool keep) {
  if (keep && !device_.is_cuda()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "logits stay on the device only for a CUDA model; this one runs on ", device_.ToString()));
  }
  if (keep && shard_.size > 1 && group_->buffer_space() != net::BufferSpace::kDevice) {
    return absl::FailedPreconditionError(
        absl::StrCat(device_.ToString(),
                     ": logits stay on the device only when the group's collectives run "
                     "on device buffers; rank ",
                     shard_.rank, "'s communicator is ", group_->backend_name()));
  }
  keep_logits_on_device_ = keep;
  return absl::OkStatus();
}

absl::Status Transformer::ComputeLogits(ForwardOutput* out) {
  const int64_t rows = static_cast<int64_t>(plan_.logit_tokens.size());
  out->vocab_size = config_.vocab_size;
  out->device_logits = nullptr;
  out->device_logit_parts = 1;
  out->device_part_vocab = config_.vocab_size;
  out->logits.resize(keep_logits_on_device_ ? 0 : rows * config_.vocab_size);
  if (rows == 0) return absl::OkStatus();  // every rank sees the same batch: all skip
  const float* parts = backend_->OutputHead();
  if (shard_.size > 1) {
    float* gathered = backend_->GatherBuffer();
    backend_->CompleteBuffers();
    RETURN_IF_ERROR(group_->AllGather(parts, rows * shard_.vocab_per_rank, gathered));
    parts = gathered;
  }
  if (keep_logits_on_device_) {  // [N, R, V'] as gathered; one rank: [R, V] (V' == V)
    out->device_logits = parts;
    out->device_logit_parts = shard_.size;
    out->device_part_vocab = shard_.vocab_per_rank;
    return absl::OkStatus();
  }
  backend_->CopyLogitsToHost(parts, out->logits.data());
  return absl::OkStatus();
}

}  // namespace splitspec::model
