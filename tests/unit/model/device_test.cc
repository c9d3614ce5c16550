// Device selection and memory accounting on the host: --device parsing, the
// start-up refusals (with a fake probe standing in for the CUDA runtime), the
// byte counts of EstimateDeviceMemory, and the transformer's device checks.
#include "runtime/model/device.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/ggml_types.h"
#include "runtime/model/device_memory.h"
#include "runtime/model/transformer.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;
using ::testing::HasSubstr;

TEST(DeviceSpecTest, ParsesCpuAndCudaOrdinals) {
  absl::StatusOr<DeviceSpec> cpu = ParseDeviceSpec("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cpu->is_cuda());
  EXPECT_EQ(cpu->ToString(), "cpu");
  for (int ordinal : {0, 1, 7, 42, kMaxCudaOrdinal}) {
    const std::string text = "cuda:" + std::to_string(ordinal);
    absl::StatusOr<DeviceSpec> cuda = ParseDeviceSpec(text);
    ASSERT_TRUE(cuda.ok()) << text << ": " << cuda.status();
    EXPECT_TRUE(cuda->is_cuda());
    EXPECT_EQ(cuda->ordinal, ordinal);
    EXPECT_EQ(cuda->ToString(), text);
  }
}

TEST(DeviceSpecTest, RefusesOtherValuesByName) {
  for (const char* bad : {"", "gpu", "CPU", "cuda", "cuda:", "cuda:-1", "cuda:256", "cuda:1x",
                          "cuda:0 ", " cuda:0", "CUDA:0", "cuda:0000", "cuda:+1", "cuda0"}) {
    absl::StatusOr<DeviceSpec> spec = ParseDeviceSpec(bad);
    ASSERT_FALSE(spec.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(spec.status().message()),
                HasSubstr(std::string("device '") + bad + "' is not cpu or cuda:N"));
  }
}

// The CUDA runtime as a test wants it.
class FakeProbe final : public DeviceProbe {
 public:
  FakeProbe(bool built, int devices, uint64_t free_bytes, uint64_t total_bytes)
      : built_(built), devices_(devices), free_(free_bytes), total_(total_bytes) {}
  bool cuda_built() const override { return built_; }
  int CudaDeviceCount() const override { return devices_; }
  absl::StatusOr<DeviceMemoryInfo> QueryCuda(int ordinal) const override {
    if (fail_query_) return absl::InternalError("cudaMemGetInfo failed on purpose");
    return DeviceMemoryInfo{"Fake GPU " + std::to_string(ordinal), free_, total_};
  }
  bool fail_query_ = false;

 private:
  bool built_;
  int devices_;
  uint64_t free_, total_;
};

constexpr DeviceSpec kCuda0{DeviceSpec::Kind::kCuda, 0};
constexpr DeviceSpec kCuda3{DeviceSpec::Kind::kCuda, 3};

TEST(CheckDeviceFitsTest, TheCpuAlwaysPasses) {
  const FakeProbe none(false, 0, 0, 0);
  EXPECT_TRUE(CheckDeviceFits(DeviceSpec{}, {.weights = 1ull << 50}, none).ok());
}

TEST(CheckDeviceFitsTest, RefusesABuildWithoutCuda) {
  const absl::Status s = CheckDeviceFits(kCuda0, {.weights = 1}, FakeProbe(false, 0, 0, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cuda:0: this splitspec was built without CUDA"));
}

TEST(CheckDeviceFitsTest, RefusesAMissingDeviceAndABadOrdinal) {
  const absl::Status none = CheckDeviceFits(kCuda0, {.weights = 1}, FakeProbe(true, 0, 0, 0));
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(none.message()),
              HasSubstr("cuda:0: no such device (0 CUDA devices visible)"));
  const absl::Status bad = CheckDeviceFits(kCuda3, {.weights = 1}, FakeProbe(true, 2, 100, 200));
  EXPECT_EQ(bad.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(bad.message()),
              HasSubstr("cuda:3: no such device (2 CUDA devices visible)"));
  const absl::Status one = CheckDeviceExists(kCuda3, FakeProbe(true, 1, 100, 200));
  EXPECT_THAT(std::string(one.message()), HasSubstr("(1 CUDA device visible)"));
}

TEST(CheckDeviceFitsTest, NamesTheDeviceAndTheBytesNeededVsFree) {
  const DeviceMemoryNeed need{.weights = 60, .kv_cache = 30, .workspace = 10};
  EXPECT_TRUE(CheckDeviceFits(kCuda0, need, FakeProbe(true, 1, 100, 1000)).ok());
  const absl::Status s = CheckDeviceFits(kCuda0, need, FakeProbe(true, 1, 99, 1000));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::string(s.message()),
            "cuda:0 (Fake GPU 0): needs 100 bytes (weights 60 + KV cache 30 + workspace 10), "
            "99 bytes free of 1000");
}

TEST(CheckDeviceFitsTest, ReportsAFailedQuery) {
  FakeProbe probe(true, 1, 100, 1000);
  probe.fail_query_ = true;
  const absl::Status s = CheckDeviceFits(kCuda0, {.weights = 1}, probe);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("failed on purpose"));
}

// --- memory accounting ---

std::unique_ptr<Transformer> LoadTiny(const TinyModelOptions& options, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name + ".gguf";
  EXPECT_TRUE(WriteTinyModel(options, path).ok());
  absl::StatusOr<std::unique_ptr<Transformer>> model = Transformer::Load(path, {.threads = 1});
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(*model);
}

// The bytes of every tensor the device holds, counted here from the model's
// shapes and types, each rounded up to the alignment.
uint64_t ExpectedWeightBytes(const ModelConfig& c, GgmlType matrix, GgmlType embd, bool tied) {
  auto matrix_bytes = [](GgmlType type, int64_t rows, int64_t cols) {
    return AlignDeviceBytes(rows * kernels::RowBytes(type, cols));
  };
  const uint64_t norm = AlignDeviceBytes(c.n_embd * sizeof(float));
  uint64_t per_layer =
      2 * norm + matrix_bytes(matrix, c.q_dim(), c.n_embd) +
      2 * matrix_bytes(matrix, c.kv_dim(), c.n_embd) + matrix_bytes(matrix, c.n_embd, c.q_dim()) +
      2 * matrix_bytes(matrix, c.n_ff, c.n_embd) + matrix_bytes(matrix, c.n_embd, c.n_ff);
  uint64_t total = c.n_layers * per_layer + norm + matrix_bytes(embd, c.vocab_size, c.n_embd);
  if (!tied) total += matrix_bytes(matrix, c.vocab_size, c.n_embd);
  return total;
}

TEST(DeviceMemoryTest, WeightsAreCountedAsStoredAndATiedHeadOnce) {
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                        GgmlType::kQ4_0, GgmlType::kQ4_1}) {
    for (bool tied : {true, false}) {
      TinyModelOptions options;
      options.weight_type = type;
      options.embedding_type = type;
      options.tied_output = tied;
      const std::string name = std::string("device_mem_") + kernels::GetGgmlTypeTraits(type).name +
                               (tied ? "_tied" : "");
      std::unique_ptr<Transformer> model = LoadTiny(options, name);
      const TensorParallelShard& shard = model->shard();
      auto sharded = ShardWeights(model->weights(), shard, model->config());
      const DeviceMemoryNeed need =
          EstimateDeviceMemory(model->config(), shard, *sharded, {.context_tokens = 100});
      EXPECT_EQ(need.weights, ExpectedWeightBytes(model->config(), type, type, tied)) << name;
    }
  }
}

TEST(DeviceMemoryTest, QuantizedWeightsStaySmallerThanFloat) {
  TinyModelOptions f32, q4;
  q4.weight_type = GgmlType::kQ4_0;
  std::unique_ptr<Transformer> a = LoadTiny(f32, "device_mem_cmp_f32");
  std::unique_ptr<Transformer> b = LoadTiny(q4, "device_mem_cmp_q4");
  auto wa = ShardWeights(a->weights(), a->shard(), a->config());
  auto wb = ShardWeights(b->weights(), b->shard(), b->config());
  EXPECT_LT(PlanDeviceWeights(b->config(), *wb).total_bytes,
            PlanDeviceWeights(a->config(), *wa).total_bytes);
}

TEST(DeviceMemoryTest, KvCacheIsHalfPrecisionPerPositionLayerAndSequence) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{}, "device_mem_kv");
  const ModelConfig& c = model->config();
  auto sharded = ShardWeights(model->weights(), model->shard(), c);
  // 2 layers x (K, V) x kv_dim 32 x 2 bytes = 256 bytes a position (aligned per sequence).
  EXPECT_EQ(DeviceKvCacheBytes(c.n_layers, c.kv_dim(), 100), 25600u);
  const DeviceMemoryNeed need = EstimateDeviceMemory(
      c, model->shard(), *sharded, {.context_tokens = 100, .sequences = 3, .step_tokens = 16});
  EXPECT_EQ(need.kv_cache, 3u * 25600u);
  const DeviceMemoryNeed whole_context =
      EstimateDeviceMemory(c, model->shard(), *sharded, {.sequences = 1});
  EXPECT_EQ(whole_context.kv_cache, DeviceKvCacheBytes(c.n_layers, c.kv_dim(), c.context_length));
  EXPECT_EQ(need.total(), need.weights + need.kv_cache + need.workspace);
}

TEST(DeviceMemoryTest, WorkspaceHoldsEveryBufferOfTheStep) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{}, "device_mem_ws");
  const ModelConfig& c = model->config();
  const DeviceWorkspaceLayout w = PlanDeviceWorkspace(c, model->shard(), 10, 3);
  EXPECT_EQ(w.act_cols, std::max({c.n_embd, c.q_dim(), c.n_ff}));
  // Buffers are aligned, in order, and each leaves room for its contents.
  const std::vector<std::pair<uint64_t, uint64_t>> buffers = {
      {w.x, 10 * c.n_embd * 4},       {w.xn, 10 * c.n_embd * 4},
      {w.partial, 10 * c.n_embd * 4}, {w.q, 10 * c.q_dim() * 4},
      {w.attn, 10 * c.q_dim() * 4},   {w.k, 10 * c.kv_dim() * 4},
      {w.v, 10 * c.kv_dim() * 4},     {w.gate, 10 * c.n_ff * 4},
      {w.up, 10 * c.n_ff * 4},        {w.act_qs, 10 * static_cast<uint64_t>(w.act_cols)},
      {w.head_x, 3 * c.n_embd * 4},   {w.logits, 3 * static_cast<uint64_t>(c.vocab_size) * 4},
  };
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(buffers[i].first % kDeviceAlignment, 0u) << i;
    EXPECT_LE(buffers[i].first + buffers[i].second, w.total_bytes) << i;
    if (i + 1 < buffers.size() && buffers[i + 1].first > buffers[i].first) {
      EXPECT_GE(buffers[i + 1].first - buffers[i].first, buffers[i].second) << i;
    }
  }
  EXPECT_LT(PlanDeviceWorkspace(c, model->shard(), 10, 3).total_bytes,
            PlanDeviceWorkspace(c, model->shard(), 20, 3).total_bytes);
}

// --- the transformer's checks ---

TEST(TransformerDeviceTest, ACudaDeviceIsRefusedAtLoadWhenAbsent) {
  const std::string path = ::testing::TempDir() + "/device_load.gguf";
  ASSERT_TRUE(WriteTinyModel(TinyModelOptions{}, path).ok());
  const DeviceProbe& probe = SystemDeviceProbe();
  if (probe.cuda_built() && probe.CudaDeviceCount() > 0) {
    GTEST_SKIP() << "a CUDA device is visible: the gpu-labelled tests cover loading on it";
  }
  absl::StatusOr<std::unique_ptr<Transformer>> model =
      Transformer::Load(path, {.threads = 1, .device = kCuda0});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr(probe.cuda_built() ? "cuda:0: no such device (0 CUDA devices visible)"
                                           : "cuda:0: this splitspec was built without CUDA"));
  // A bad ordinal says the same kind of thing, with its number.
  absl::StatusOr<std::unique_ptr<Transformer>> seven =
      Transformer::Load(path, {.threads = 1, .device = {DeviceSpec::Kind::kCuda, 7}});
  ASSERT_FALSE(seven.ok());
  EXPECT_THAT(std::string(seven.status().message()), HasSubstr("cuda:7: "));
}

// A cache that claims to live on a device: the CPU model must refuse it.
class DeviceClaimingCache final : public KvCache {
 public:
  using KvCache::KvCache;
  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
};

TEST(TransformerDeviceTest, RefusesACacheFromAnotherMemorySpace) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{}, "device_cache_space");
  EXPECT_EQ(model->device().ToString(), "cpu");
  DeviceClaimingCache cache(model->config().n_layers, model->config().kv_dim(), 16);
  const std::vector<int32_t> tokens = {1, 2};
  ForwardOutput out;
  const absl::Status s = model->Forward({{&cache, tokens, LogitsMode::kLast}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("sequence 0: KV cache in device memory, the model runs on cpu"));
  EXPECT_EQ(cache.length(), 0);
}

// Storage that cannot grow (a device out of memory): Reserve reports it and the
// cache, and the forward, leave everything as it was.
class FullCache final : public KvCache {
 public:
  using KvCache::KvCache;

 protected:
  absl::Status GrowStorage(int capacity) override {
    return absl::ResourceExhaustedError("no room for " + std::to_string(capacity) + " positions");
  }
};

TEST(TransformerDeviceTest, AStorageFailureLeavesTheCacheUnchanged) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{}, "device_cache_full");
  FullCache cache(model->config().n_layers, model->config().kv_dim(), 16);
  EXPECT_EQ(cache.Reserve(4).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.memory_bytes(), 0u);
  const std::vector<int32_t> tokens = {1, 2, 3};
  ForwardOutput out;
  const absl::Status s = model->Forward({{&cache, tokens, LogitsMode::kLast}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no room for 16 positions"));
  EXPECT_EQ(cache.length(), 0);
}

}  // namespace
}  // namespace splitspec::model
