#include "runtime/model/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quant_matmul.h"
#include "kernels/cuda/transformer_kernels.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/cuda_graph_plan.h"
#include "runtime/model/cuda_kv_cache.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model {
namespace {

using kernels::DeviceMatrix;

struct LayerOnDevice {
  const float* attn_norm = nullptr;
  DeviceMatrix wq, wk, wv, wo;
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* ffn_norm = nullptr;
  DeviceMatrix gate, up, down;
};

// One matmul of a call: weights and where its output rows go.
struct DeviceJob {
  const DeviceMatrix* w;
  float* y;
  int64_t y_stride;
};

absl::Status CheckType(const WeightMatrix& m, const std::string& what) {
  if (kernels::CudaSupportsWeightType(m.type)) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      what, ": ggml type ", kernels::GetGgmlTypeTraits(m.type).name,
      " has no CUDA kernel yet (CUDA runs f32, f16, bf16, q8_0, q4_0, q4_1, q4_k, q5_k, q6_k);"
      " use --device cpu"));
}

absl::Status CheckTypes(const ModelConfig& config, const ShardedWeights& w) {
  for (int l = 0; l < config.n_layers; ++l) {
    const ShardedLayerWeights& lw = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    RETURN_IF_ERROR(CheckType(lw.wq, p + "attn_q.weight"));
    RETURN_IF_ERROR(CheckType(lw.wk, p + "attn_k.weight"));
    RETURN_IF_ERROR(CheckType(lw.wv, p + "attn_v.weight"));
    RETURN_IF_ERROR(CheckType(lw.wo, p + "attn_output.weight"));
    RETURN_IF_ERROR(CheckType(lw.gate, p + "ffn_gate.weight"));
    RETURN_IF_ERROR(CheckType(lw.up, p + "ffn_up.weight"));
    RETURN_IF_ERROR(CheckType(lw.down, p + "ffn_down.weight"));
  }
  RETURN_IF_ERROR(CheckType(w.full->token_embd, "token_embd.weight"));
  return CheckType(w.output, "output.weight");
}

// How the current call runs (cuda_graph_plan.h).
enum class CallMode { kEager, kCapture, kReplay };

// Failed captures after which a backend runs every call eagerly.
constexpr int kMaxCaptureFailures = 3;

class CudaBackend final : public TransformerBackend {
 public:
  CudaBackend(const ModelConfig& config, const TensorParallelShard& shard,
              const ShardedWeights& weights, int device)
      : config_(config),
        shard_(shard),
        weights_(weights),
        device_(device),
        q_dim_(shard.q_dim(config)),
        kv_dim_(shard.kv_dim(config)),
        ff_(shard.ff.size()) {}

  ~CudaBackend() override {
    kernels::IgnoreCudaError(cudaSetDevice(device_));
    AbortCapture();
    DestroyGraphs();
    if (stream_ != nullptr) {
      kernels::IgnoreCudaError(cudaStreamSynchronize(stream_));
      kernels::IgnoreCudaError(cudaStreamDestroy(stream_));
    }
    kernels::IgnoreCudaError(cudaFree(workspace_));
    kernels::IgnoreCudaError(cudaFree(weights_dev_));
  }

  absl::Status Init(const DeviceMemoryBudget& budget, bool cuda_graphs);

  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  std::unique_ptr<KvCache> NewCache(int max_tokens) const override {
    return std::make_unique<CudaKvCache>(config_.n_layers, static_cast<int>(kv_dim_), max_tokens,
                                         device_, stream_);
  }
  void Begin(const ForwardPlan& plan) override;
  float* Attention(int layer) override;
  float* FeedForward(int layer) override;
  void AddToResidual() override;
  const float* OutputHead() override;
  float* GatherBuffer() override { return Ws<float>(ws_.gathered); }
  void CompleteBuffers() override {
    Ok(kernels::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", __FILE__,
                           __LINE__));
  }
  void CopyLogitsToHost(const float* parts, float* host_logits) override;
  absl::Status Finish() override;
  BackendCounters counters() const override { return counters_; }
  bool RetryEagerly() const override { return retry_eagerly_; }
  void FailNextGraphCaptureForTesting() override { fail_next_capture_ = true; }

 private:
  // Tokens and logit rows the kernels run over: the call's, or its bucket's when padded.
  int64_t tokens() const { return run_tokens_; }
  int64_t logit_rows() const { return run_rows_; }
  // The call's own logit rows (the ones copied out).
  int64_t real_logit_rows() const { return static_cast<int64_t>(plan_->logit_tokens.size()); }
  bool launches() const { return mode_ != CallMode::kReplay; }
  // Chooses eager / capture / replay for the call and sizes the workspace.
  void PlanCall();
  void DestroyGraph(int64_t id);
  void DestroyGraphs();
  // The workspace moved: every captured pointer is stale.
  void InvalidateGraphs();
  // Ends the capture begun in Begin, instantiates the graph and launches it.
  void EndCaptureAndLaunch();
  // Ends a capture that a failure left open (the stream stays unusable otherwise).
  void AbortCapture();
  // Keeps the first error of the call; true while there is none.
  bool Ok(const absl::Status& status) {
    if (error_.ok() && !status.ok()) error_ = status;
    return error_.ok();
  }
  template <typename T>
  T* Ws(uint64_t offset) const {
    return workspace_ == nullptr ? nullptr : reinterpret_cast<T*>(workspace_ + offset);
  }
  const float* DeviceFloats(const std::vector<float>& v) const;
  DeviceMatrix OnDevice(const WeightMatrix& m) const;
  absl::Status UploadWeights();
  absl::Status EnsureWorkspace(int64_t tokens, int64_t rows);
  absl::Status UploadPlan();
  template <typename T>
  absl::Status Upload(const std::vector<T>& host, uint64_t offset);
  // Every job's y = x W^T over `rows` rows of x [rows, cols], x quantized once if needed.
  void MatMul(const float* x, int64_t cols, std::initializer_list<DeviceJob> jobs, int64_t rows);
  void NormRows(const float* weight);

  const ModelConfig& config_;
  const TensorParallelShard shard_;
  const ShardedWeights& weights_;
  const int device_;
  const int64_t q_dim_, kv_dim_, ff_;
  const ForwardPlan* plan_ = nullptr;
  absl::Status error_;

  cudaStream_t stream_ = nullptr;
  DeviceWeightLayout layout_;
  uint8_t* weights_dev_ = nullptr;
  std::vector<LayerOnDevice> layers_;
  DeviceMatrix embd_, output_;
  const float* output_norm_ = nullptr;
  DeviceWorkspaceLayout ws_;
  uint8_t* workspace_ = nullptr;

  // CUDA graphs (null bucketer: disabled, or a group of more than one rank).
  std::optional<GraphBucketer> bucketer_;
  std::map<int64_t, cudaGraphExec_t> graphs_;
  std::unique_ptr<CudaKvCache> padding_cache_;  // one position: where padded tokens write
  CallMode mode_ = CallMode::kEager;
  bool capturing_ = false;  // stream_ is in capture mode
  int64_t graph_id_ = -1;
  int64_t run_tokens_ = 0, run_rows_ = 0;
  int run_positions_ = 0;
  BackendCounters counters_;
  // A capture failed: Finish reported it, the next call runs eagerly (backend.h).
  bool retry_eagerly_ = false;
  bool force_eager_ = false;
  int capture_failures_ = 0;  // graphs are turned off after kMaxCaptureFailures
  bool fail_next_capture_ = false;

  // Host staging of the per-call metadata.
  std::vector<int32_t> ids_, pos_, logit_tokens_;
  std::vector<kernels::DeviceKvRef> refs_;
  std::vector<float> cos_, sin_;
};

const float* CudaBackend::DeviceFloats(const std::vector<float>& v) const {
  const int64_t offset = layout_.OffsetOf(v.data());
  return offset < 0 ? nullptr : reinterpret_cast<const float*>(weights_dev_ + offset);
}

DeviceMatrix CudaBackend::OnDevice(const WeightMatrix& m) const {
  const int64_t offset = layout_.OffsetOf(m.data);
  return DeviceMatrix{m.type, weights_dev_ + offset, m.rows, m.cols};
}

absl::Status CudaBackend::UploadWeights() {
  layout_ = PlanDeviceWeights(config_, weights_);
  void* dev = nullptr;
  if (cudaMalloc(&dev, layout_.total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cuda:", device_, ": cannot allocate ", layout_.total_bytes, " bytes for the weights"));
  }
  weights_dev_ = static_cast<uint8_t*>(dev);
  // On the backend's stream, and waited for: a plain cudaMemcpy from pageable memory
  // returns before the data reaches the device and orders nothing with a
  // non-blocking stream.
  for (const DeviceWeightLayout::Entry& e : layout_.entries) {
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(weights_dev_ + e.offset, e.host, e.bytes,
                                         cudaMemcpyHostToDevice, stream_));
  }
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (int l = 0; l < config_.n_layers; ++l) {
    const ShardedLayerWeights& lw = weights_.layers[l];
    LayerOnDevice d;
    d.attn_norm = DeviceFloats(*lw.attn_norm);
    d.wq = OnDevice(lw.wq);
    d.wk = OnDevice(lw.wk);
    d.wv = OnDevice(lw.wv);
    d.wo = OnDevice(lw.wo);
    d.bq = DeviceFloats(lw.bq);
    d.bk = DeviceFloats(lw.bk);
    d.bv = DeviceFloats(lw.bv);
    d.ffn_norm = DeviceFloats(*lw.ffn_norm);
    d.gate = OnDevice(lw.gate);
    d.up = OnDevice(lw.up);
    d.down = OnDevice(lw.down);
    layers_.push_back(d);
  }
  embd_ = OnDevice(weights_.full->token_embd);
  output_ = OnDevice(weights_.output);
  output_norm_ = DeviceFloats(weights_.full->output_norm);
  return absl::OkStatus();
}

absl::Status CudaBackend::Init(const DeviceMemoryBudget& budget, bool cuda_graphs) {
  RETURN_IF_ERROR(CheckTypes(config_, weights_));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  // Non-blocking: the legacy default stream (another library's, a stray cudaMemcpy)
  // never serializes with the forward; every copy this backend makes is on stream_.
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RETURN_IF_ERROR(UploadWeights());
  if (cuda_graphs && shard_.size == 1) {
    ASSIGN_OR_RETURN(GraphBucketer bucketer, GraphBucketer::Create(GraphBucketOptions{}));
    bucketer_.emplace(std::move(bucketer));
    padding_cache_ = std::make_unique<CudaKvCache>(config_.n_layers, static_cast<int>(kv_dim_), 1,
                                                   device_, stream_);
    RETURN_IF_ERROR(padding_cache_->Reserve(1));
  }
  const int64_t step = std::max(budget.step_tokens, 1);
  return EnsureWorkspace(step, step);
}

void CudaBackend::DestroyGraph(int64_t id) {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return;
  kernels::IgnoreCudaError(cudaGraphExecDestroy(it->second));
  graphs_.erase(it);
}

void CudaBackend::DestroyGraphs() {
  for (const auto& [id, exec] : graphs_) kernels::IgnoreCudaError(cudaGraphExecDestroy(exec));
  graphs_.clear();
}

void CudaBackend::InvalidateGraphs() {
  if (!bucketer_.has_value()) return;
  DestroyGraphs();
  bucketer_->Invalidate();
}

void CudaBackend::PlanCall() {
  mode_ = CallMode::kEager;
  run_tokens_ = static_cast<int64_t>(plan_->token_seq.size());
  run_rows_ = real_logit_rows();
  run_positions_ = plan_->max_positions;
  if (force_eager_) {  // the retry of a call whose capture failed
    force_eager_ = false;
    return;
  }
  if (!bucketer_.has_value() || run_rows_ == 0) return;  // OutputHead must end a graph
  GraphStepShape shape;
  shape.tokens = static_cast<int>(run_tokens_);
  shape.logit_rows = static_cast<int>(run_rows_);
  shape.max_positions = plan_->max_positions;
  for (const SequenceInput& in : plan_->batch) {
    shape.max_tokens_per_sequence =
        std::max(shape.max_tokens_per_sequence, static_cast<int>(in.tokens.size()));
  }
  const GraphDecision d = bucketer_->Decide(shape);
  for (int64_t id : d.evicted) DestroyGraph(id);
  if (d.action == GraphAction::kEager) return;
  if (d.bucket_tokens > ws_.tokens || d.bucket_tokens > ws_.logit_rows) {
    // Growing the workspace moves it: this call runs eagerly, the bucket is captured next time.
    Ok(EnsureWorkspace(d.bucket_tokens, d.bucket_tokens));
    return;
  }
  if (d.action == GraphAction::kReplay && !graphs_.contains(d.graph_id)) {
    InvalidateGraphs();  // a capture failed earlier: start over
    return;
  }
  mode_ = d.action == GraphAction::kReplay ? CallMode::kReplay : CallMode::kCapture;
  graph_id_ = d.graph_id;
  run_tokens_ = run_rows_ = d.bucket_tokens;
  run_positions_ = d.bucket_positions;
}

absl::Status CudaBackend::EnsureWorkspace(int64_t tokens, int64_t rows) {
  if (workspace_ != nullptr && tokens <= ws_.tokens && rows <= ws_.logit_rows) {
    return absl::OkStatus();
  }
  const DeviceWorkspaceLayout next = PlanDeviceWorkspace(
      config_, shard_, std::max(tokens, ws_.tokens), std::max(rows, ws_.logit_rows));
  if (workspace_ != nullptr) {
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    InvalidateGraphs();  // they captured the old workspace's pointers
    kernels::IgnoreCudaError(cudaFree(workspace_));
    workspace_ = nullptr;
  }
  void* dev = nullptr;
  if (cudaMalloc(&dev, next.total_bytes) != cudaSuccess) {
    cudaGetLastError();
    ws_ = DeviceWorkspaceLayout{};
    return absl::ResourceExhaustedError(absl::StrCat("cuda:", device_, ": cannot allocate ",
                                                     next.total_bytes, " bytes of workspace for ",
                                                     next.tokens, " tokens"));
  }
  workspace_ = static_cast<uint8_t*>(dev);
  ws_ = next;
  return absl::OkStatus();
}

template <typename T>
absl::Status CudaBackend::Upload(const std::vector<T>& host, uint64_t offset) {
  if (host.empty()) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(workspace_ + offset, host.data(), host.size() * sizeof(T),
                                       cudaMemcpyHostToDevice, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::UploadPlan() {
  const int64_t t_count = static_cast<int64_t>(plan_->token_seq.size());
  const int64_t padded = tokens();  // > t_count only for a graph's bucket
  const int pairs = config_.rope_dim / 2;
  ids_.clear();
  for (const SequenceInput& in : plan_->batch)
    ids_.insert(ids_.end(), in.tokens.begin(), in.tokens.end());
  pos_.assign(plan_->token_pos.begin(), plan_->token_pos.end());
  refs_.resize(padded);
  cos_.resize(padded * pairs);
  sin_.resize(padded * pairs);
  // Padded tokens: token 0 at position 0 of the padding cache; their logit rows read token 0.
  ids_.resize(padded, 0);
  pos_.resize(padded, 0);
  for (int64_t t = t_count; t < padded; ++t) {
    refs_[t] =
        kernels::DeviceKvRef{padding_cache_->device_rows(), padding_cache_->storage_positions(), 0};
    internal::RopeAngles(config_, weights_.full->rope_freq_factors, 0, &cos_[t * pairs],
                         &sin_[t * pairs]);
  }
  for (int64_t t = 0; t < t_count; ++t) {
    auto* cache = dynamic_cast<CudaKvCache*>(plan_->batch[plan_->token_seq[t]].cache);
    if (cache == nullptr || cache->device_rows() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", plan_->token_seq[t], ": not a reserved KV cache of cuda:", device_));
    }
    refs_[t] = kernels::DeviceKvRef{cache->device_rows(), cache->storage_positions(), 0};
    internal::RopeAngles(config_, weights_.full->rope_freq_factors, plan_->token_pos[t],
                         &cos_[t * pairs], &sin_[t * pairs]);
  }
  logit_tokens_.assign(plan_->logit_tokens.begin(), plan_->logit_tokens.end());
  logit_tokens_.resize(logit_rows(), 0);
  RETURN_IF_ERROR(Upload(ids_, ws_.token_ids));
  RETURN_IF_ERROR(Upload(pos_, ws_.token_pos));
  RETURN_IF_ERROR(Upload(refs_, ws_.token_cache));
  RETURN_IF_ERROR(Upload(cos_, ws_.rope_cos));
  RETURN_IF_ERROR(Upload(sin_, ws_.rope_sin));
  return Upload(logit_tokens_, ws_.logit_tokens);
}

void CudaBackend::Begin(const ForwardPlan& plan) {
  plan_ = &plan;
  error_ = absl::OkStatus();
  retry_eagerly_ = false;
  AbortCapture();  // a previous call that never reached Finish (nothing when none is open)
  if (!Ok(kernels::CudaStatus(cudaSetDevice(device_), "cudaSetDevice", __FILE__, __LINE__))) {
    return;
  }
  PlanCall();
  if (!error_.ok()) return;
  if (mode_ == CallMode::kEager) {
    ++counters_.eager_calls;
    if (!Ok(EnsureWorkspace(tokens(), logit_rows()))) return;
  }
  if (!Ok(UploadPlan())) return;
  if (mode_ == CallMode::kReplay) return;  // OutputHead launches the graph
  if (mode_ == CallMode::kCapture) {
    if (!Ok(kernels::CudaStatus(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                "cudaStreamBeginCapture", __FILE__, __LINE__))) {
      return;
    }
    capturing_ = true;
    if (fail_next_capture_) {
      fail_next_capture_ = false;
      // Synchronizing a capturing stream is forbidden: CUDA fails the call and
      // invalidates the capture, as any unsupported operation during a capture does.
      Ok(kernels::CudaStatus(cudaStreamSynchronize(stream_),
                             "cudaStreamSynchronize during a capture (injected)", __FILE__,
                             __LINE__));
      Ok(absl::InternalError("injected graph capture failure"));
    }
  }
  Ok(kernels::LaunchEmbedRows(embd_, Ws<int32_t>(ws_.token_ids), tokens(), Ws<float>(ws_.x),
                              stream_));
}

void CudaBackend::AbortCapture() {
  if (!capturing_) return;
  cudaGraph_t graph = nullptr;
  kernels::IgnoreCudaError(cudaStreamEndCapture(stream_, &graph));
  capturing_ = false;
  if (graph != nullptr) kernels::IgnoreCudaError(cudaGraphDestroy(graph));
  kernels::DiscardStaleCudaError();
  InvalidateGraphs();
}

void CudaBackend::EndCaptureAndLaunch() {
  cudaGraph_t graph = nullptr;
  // The capture ends even after a failed launch, or the stream stays in capture mode.
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  capturing_ = false;
  if (Ok(kernels::CudaStatus(ended, "cudaStreamEndCapture", __FILE__, __LINE__))) {
    cudaGraphExec_t exec = nullptr;
    if (Ok(kernels::CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate",
                               __FILE__, __LINE__))) {
      graphs_[graph_id_] = exec;
      ++counters_.graph_captures;
      // A capture records the kernels without running them: run them now.
      Ok(kernels::CudaStatus(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch", __FILE__,
                             __LINE__));
    }
  }
  if (graph != nullptr) kernels::IgnoreCudaError(cudaGraphDestroy(graph));
  if (!error_.ok()) InvalidateGraphs();
}

void CudaBackend::MatMul(const float* x, int64_t cols, std::initializer_list<DeviceJob> jobs,
                         int64_t rows) {
  if (!error_.ok()) return;
  const kernels::DeviceQ8Activations xq{Ws<int8_t>(ws_.act_qs), Ws<float>(ws_.act_d),
                                        Ws<float>(ws_.act_dsum), Ws<float>(ws_.act_sum)};
  // Jobs are grouped by the activations they read (a K-quant model mixes Q6_K with
  // Q4_K, or a 32-block fallback type, in one call): each quantized layout is written
  // into the shared buffers just before its jobs, which stream order lets read it.
  using kernels::CudaActivationLayout;
  for (CudaActivationLayout layout : {CudaActivationLayout::kFloat, CudaActivationLayout::kBlock32,
                                      CudaActivationLayout::kBlock256}) {
    bool any = false;
    for (const DeviceJob& job : jobs) {
      any = any || kernels::CudaMatMulActivationLayout(job.w->type) == layout;
    }
    if (!any) continue;
    if (!Ok(kernels::LaunchQuantizeActivations(layout, x, rows, cols, xq, stream_))) return;
    // One call per layout: jobs of one weight type share a launch (Q/K/V, gate/up).
    std::vector<kernels::MatMulJob> same_layout;
    for (const DeviceJob& job : jobs) {
      if (kernels::CudaMatMulActivationLayout(job.w->type) != layout) continue;
      same_layout.push_back({*job.w, job.y, job.y_stride});
    }
    if (!Ok(kernels::LaunchMatMuls(same_layout, x, &xq, rows, stream_))) return;
  }
}

void CudaBackend::NormRows(const float* weight) {
  if (!error_.ok()) return;
  Ok(kernels::LaunchRmsNormRows(Ws<float>(ws_.x), nullptr, tokens(), config_.n_embd, weight,
                                config_.rms_norm_eps, Ws<float>(ws_.xn), stream_));
}

float* CudaBackend::Attention(int layer) {
  const LayerOnDevice& lw = layers_[layer];
  float* partial = Ws<float>(ws_.partial);
  if (!error_.ok() || !launches()) return partial;
  const int64_t t = tokens();
  float* q = Ws<float>(ws_.q);
  float* k = Ws<float>(ws_.k);
  float* v = Ws<float>(ws_.v);
  NormRows(lw.attn_norm);
  MatMul(Ws<float>(ws_.xn), config_.n_embd,
         {{&lw.wq, q, q_dim_}, {&lw.wk, k, kv_dim_}, {&lw.wv, v, kv_dim_}}, t);
  if (config_.qkv_bias && error_.ok()) {
    Ok(kernels::LaunchAddBias(q, lw.bq, t, q_dim_, stream_));
    Ok(kernels::LaunchAddBias(k, lw.bk, t, kv_dim_, stream_));
    Ok(kernels::LaunchAddBias(v, lw.bv, t, kv_dim_, stream_));
  }
  const auto* refs = Ws<kernels::DeviceKvRef>(ws_.token_cache);
  const auto* pos = Ws<int32_t>(ws_.token_pos);
  if (error_.ok()) {
    kernels::RopeStoreShape rope;
    rope.head_dim = config_.head_dim;
    rope.rope_dim = config_.rope_dim;
    rope.half_split = config_.rope_layout == RopeLayout::kHalfSplit;
    rope.q_heads = static_cast<int>(shard_.heads.size());
    rope.kv_heads = static_cast<int>(shard_.kv_heads.size());
    rope.layer = layer;
    Ok(kernels::LaunchRopeAndStore(q, k, v, Ws<float>(ws_.rope_cos), Ws<float>(ws_.rope_sin), pos,
                                   refs, rope, t, stream_));
  }
  if (error_.ok()) {
    kernels::AttentionShape shape;
    shape.q_heads = static_cast<int>(shard_.heads.size());
    shape.head_begin = static_cast<int>(shard_.heads.begin);
    shape.kv_head_begin = static_cast<int>(shard_.kv_heads.begin);
    shape.group = config_.n_heads / config_.n_kv_heads;
    shape.head_dim = config_.head_dim;
    shape.kv_heads = static_cast<int>(shard_.kv_heads.size());
    shape.layer = layer;
    shape.max_positions = run_positions_;
    shape.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
    Ok(kernels::LaunchAttention(q, refs, pos, shape, t, Ws<float>(ws_.attn), stream_));
  }
  MatMul(Ws<float>(ws_.attn), q_dim_, {{&lw.wo, partial, config_.n_embd}}, t);
  return partial;
}

float* CudaBackend::FeedForward(int layer) {
  const LayerOnDevice& lw = layers_[layer];
  float* partial = Ws<float>(ws_.partial);
  if (!error_.ok() || !launches()) return partial;
  const int64_t t = tokens();
  float* gate = Ws<float>(ws_.gate);
  float* up = Ws<float>(ws_.up);
  NormRows(lw.ffn_norm);
  MatMul(Ws<float>(ws_.xn), config_.n_embd, {{&lw.gate, gate, ff_}, {&lw.up, up, ff_}}, t);
  if (error_.ok()) Ok(kernels::LaunchSiluMul(gate, up, t * ff_, stream_));
  MatMul(gate, ff_, {{&lw.down, partial, config_.n_embd}}, t);
  return partial;
}

void CudaBackend::AddToResidual() {
  if (!error_.ok() || !launches()) return;
  Ok(kernels::LaunchAddInPlace(Ws<float>(ws_.x), Ws<float>(ws_.partial), tokens() * config_.n_embd,
                               stream_));
}

const float* CudaBackend::OutputHead() {
  float* logits = Ws<float>(ws_.logits);
  if (!error_.ok()) {
    AbortCapture();
    return logits;
  }
  if (mode_ == CallMode::kReplay) {
    ++counters_.graph_replays;
    Ok(kernels::CudaStatus(cudaGraphLaunch(graphs_.at(graph_id_), stream_), "cudaGraphLaunch",
                           __FILE__, __LINE__));
    return logits;
  }
  const int64_t rows = logit_rows();
  float* head_x = Ws<float>(ws_.head_x);
  Ok(kernels::LaunchRmsNormRows(Ws<float>(ws_.x), Ws<int32_t>(ws_.logit_tokens), rows,
                                config_.n_embd, output_norm_, config_.rms_norm_eps, head_x,
                                stream_));
  const int64_t per_rank = shard_.vocab_per_rank;
  if (shard_.vocab.size() < per_rank && error_.ok()) {
    Ok(kernels::CudaStatus(
        cudaMemsetAsync(logits, 0, static_cast<size_t>(rows) * per_rank * sizeof(float), stream_),
        "cudaMemsetAsync(logits)", __FILE__, __LINE__));
  }
  MatMul(head_x, config_.n_embd, {{&output_, logits, per_rank}}, rows);
  if (mode_ == CallMode::kCapture) EndCaptureAndLaunch();
  return logits;
}

void CudaBackend::CopyLogitsToHost(const float* parts, float* host_logits) {
  if (!error_.ok()) return;
  const int64_t rows = real_logit_rows();
  const int64_t vocab = config_.vocab_size;
  const int64_t per_rank = shard_.vocab_per_rank;
  for (int rank = 0; rank < shard_.size && error_.ok(); ++rank) {
    const int64_t begin = std::min(vocab, per_rank * rank);
    const int64_t width = std::min(vocab, per_rank * (rank + 1)) - begin;
    const float* part = parts + static_cast<size_t>(rank) * rows * per_rank;
    Ok(kernels::CudaStatus(cudaMemcpy2DAsync(host_logits + begin, vocab * sizeof(float), part,
                                             per_rank * sizeof(float), width * sizeof(float), rows,
                                             cudaMemcpyDeviceToHost, stream_),
                           "cudaMemcpy2DAsync(logits)", __FILE__, __LINE__));
  }
}

absl::Status CudaBackend::Finish() {
  if (capturing_) {  // the call ended before OutputHead
    AbortCapture();
    Ok(absl::InternalError("cuda graph capture left open: the call ended before its output head"));
  }
  Ok(kernels::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", __FILE__,
                         __LINE__));
  if (!error_.ok() && mode_ == CallMode::kCapture) {
    // Nothing of the call ran (a capture records, the graph never launched or its
    // launch failed before running): the transformer runs it again, eagerly.
    retry_eagerly_ = true;
    force_eager_ = true;
    ++counters_.graph_capture_fallbacks;
    if (++capture_failures_ >= kMaxCaptureFailures && bucketer_.has_value()) {
      DestroyGraphs();
      bucketer_.reset();  // this device will not capture: stop paying for the attempts
    }
  }
  return error_;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TransformerBackend>> NewCudaBackend(
    const ModelConfig& config, const TensorParallelShard& shard, const ShardedWeights& weights,
    int device, const DeviceMemoryBudget& budget, bool cuda_graphs) {
  auto backend = std::make_unique<CudaBackend>(config, shard, weights, device);
  RETURN_IF_ERROR(backend->Init(budget, cuda_graphs));
  return std::unique_ptr<TransformerBackend>(std::move(backend));
}

}  // namespace splitspec::model
