// The sharded forward on CUDA device buffers (issue 19 item 6) on one GPU: two
// tensor-parallel ranks as threads, both on cuda:0, joined by Gloo staged
// through the host (NCCL refuses two ranks on one device). Their logits match
// the one-rank CUDA forward within the bound the CPU's TP test states, and the
// ranks hold identical logits; a host communicator without staging is refused; a
// one-rank NCCL group (NCCL builds) gives the ungrouped logits. The leader of a
// staged group keeps the gathered logits on its device, in blocks that put
// together are the host logits bit for bit. Skips without a device.
//
// With two or more GPUs only (the lent machines have one, so this has not run):
// two ranks on cuda:0 and cuda:1 joined by NCCL, their unique id passed through a
// file store, match the one-rank forward as the staged group does.
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/base/status_macros.h"
#include "runtime/dist/cuda_device_identity.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/dist/host_staged_communicator.h"
#if defined(SPLITSPEC_HAVE_NCCL)
#include "runtime/dist/nccl_communicator.h"
#endif
#include "runtime/model/device.h"
#include "runtime/model/transformer.h"
#include "tests/testing/gloo_group.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

constexpr DeviceSpec kCuda0{DeviceSpec::Kind::kCuda, 0};
// As tests/unit/model/tp_transformer_test.cc for Q8_0 weights: the TP sum reorders
// the partial products (and each rank quantizes its own activations), so logits
// differ from one rank's by round-off only.
constexpr double kTpRelativeBound = 2e-3;

std::string TinyModelPath() {
  TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  options.n_heads = 4;
  options.n_kv_heads = 2;
  const std::string path = ::testing::TempDir() + "/cuda_tp_tiny.gguf";
  EXPECT_TRUE(WriteTinyModel(options, path).ok());
  return path;
}

absl::StatusOr<std::vector<float>> PromptLogits(Transformer& model,
                                                const std::vector<int32_t>& prompt) {
  std::unique_ptr<KvCache> cache = model.NewCache(128);
  ForwardOutput out;
  out.logits.assign(prompt.size() * model.config().vocab_size,
                    std::numeric_limits<float>::quiet_NaN());
  RETURN_IF_ERROR(model.Forward({{cache.get(), prompt, LogitsMode::kAll}}, &out));
  return out.logits;
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return max_abs > 0 ? max_diff / max_abs : max_diff;
}

TEST(CudaTensorParallelTest, TwoRanksOverStagedGlooMatchOneRank) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string path = TinyModelPath();
  const std::vector<int32_t> prompt = {1, 7, 3, 9, 12, 5, 2, 8, 30, 4, 11};
  auto single = Transformer::Load(path, {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(single.ok()) << single.status();
  auto want = PromptLogits(**single, prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<std::vector<float>> got(2);
  net::GlooGroupOptions ranks;
  ranks.size = 2;
  const std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads(ranks, [&](net::Communicator& gloo) -> absl::Status {
        net::HostStagedCommunicator staged(&gloo, 0);
        ASSIGN_OR_RETURN(auto model,
                         Transformer::Load(path, &staged, {.threads = 1, .device = kCuda0}));
        ASSIGN_OR_RETURN(got[gloo.rank()], PromptLogits(*model, prompt));
        return absl::OkStatus();
      });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_LT(RelativeError(got[0], *want), kTpRelativeBound);
  EXPECT_EQ(got[0], got[1]) << "ranks must hold identical logits";
}

// The device logits' blocks (ForwardOutput: one per rank, [R, V'] each) put into
// host rows [R, V] in vocabulary order.
absl::StatusOr<std::vector<float>> DeviceLogitsToHost(const ForwardOutput& out, int64_t rows) {
  const int64_t vocab = out.vocab_size;
  const int64_t part = out.device_part_vocab;
  std::vector<float> host(rows * vocab, std::numeric_limits<float>::quiet_NaN());
  for (int p = 0; p < out.device_logit_parts; ++p) {
    const int64_t begin = std::min(vocab, part * p);
    const int64_t width = std::min(vocab, part * (p + 1)) - begin;
    if (width == 0) continue;
    CUDA_RETURN_IF_ERROR(cudaMemcpy2D(host.data() + begin, vocab * sizeof(float),
                                      out.device_logits + static_cast<size_t>(p) * rows * part,
                                      part * sizeof(float), width * sizeof(float), rows,
                                      cudaMemcpyDeviceToHost));
  }
  return host;
}

TEST(CudaTensorParallelTest, AStagedLeaderKeepsTheGatheredLogitsOnItsDevice) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string path = TinyModelPath();
  const std::vector<int32_t> prompt = {5, 3, 17, 2, 9, 1, 22};
  std::vector<std::vector<float>> got(2);
  int parts = 0;
  net::GlooGroupOptions ranks;
  ranks.size = 2;
  const std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads(ranks, [&](net::Communicator& gloo) -> absl::Status {
        net::HostStagedCommunicator staged(&gloo, 0);
        ASSIGN_OR_RETURN(auto model,
                         Transformer::Load(path, &staged, {.threads = 1, .device = kCuda0}));
        if (gloo.rank() != 0) {  // the follower brings its logits to its host
          ASSIGN_OR_RETURN(got[1], PromptLogits(*model, prompt));
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(model->KeepLogitsOnDevice(true));
        if (model->logits_device() != 0) return absl::InternalError("logits_device() is not 0");
        std::unique_ptr<KvCache> cache = model->NewCache(128);
        ForwardOutput out;
        RETURN_IF_ERROR(model->Forward({{cache.get(), prompt, LogitsMode::kAll}}, &out));
        if (!out.logits.empty() || out.device_logits == nullptr) {
          return absl::InternalError("the leader's logits came to the host");
        }
        parts = out.device_logit_parts;
        ASSIGN_OR_RETURN(got[0], DeviceLogitsToHost(out, static_cast<int64_t>(prompt.size())));
        return absl::OkStatus();
      });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_EQ(parts, 2);
  EXPECT_EQ(got[0], got[1]) << "the leader's device blocks, in vocabulary order, are the logits";
}

// The staged collectives' results are on the device when the call returns, for a
// reader on any stream: a non-blocking stream copies the gathered buffer at once, with
// no synchronization, and must see every rank's values. (A plain cudaMemcpy up from
// pageable memory returns once the data is staged, before it reaches the device, and
// orders nothing with a non-blocking stream: 64 MiB per rank leave that copy in
// flight long enough for the reader to overtake it.)
TEST(CudaTensorParallelTest, StagedResultsAreCompleteForAReaderOnAnotherStream) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kCount = 16 << 20;  // floats per rank
  net::GlooGroupOptions ranks;
  ranks.size = 2;
  ranks.timeout = absl::Seconds(60);
  const std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads(ranks, [&](net::Communicator& gloo) -> absl::Status {
        net::HostStagedCommunicator staged(&gloo, 0);
        CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
        float *in = nullptr, *out = nullptr, *copy = nullptr;
        CUDA_RETURN_IF_ERROR(cudaMalloc(&in, kCount * sizeof(float)));
        CUDA_RETURN_IF_ERROR(cudaMalloc(&out, 2 * kCount * sizeof(float)));
        CUDA_RETURN_IF_ERROR(cudaMalloc(&copy, 2 * kCount * sizeof(float)));
        cudaStream_t reader = nullptr;
        CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking));
        absl::Status status;
        for (int round = 0; round < 3 && status.ok(); ++round) {
          const std::vector<float> mine(kCount, static_cast<float>(10 * round + gloo.rank() + 1));
          CUDA_RETURN_IF_ERROR(
              cudaMemcpy(in, mine.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
          CUDA_RETURN_IF_ERROR(cudaMemset(out, 0, 2 * kCount * sizeof(float)));
          CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
          status = staged.AllGather(in, kCount, out);
          if (!status.ok()) break;
          CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(copy, out, 2 * kCount * sizeof(float),
                                               cudaMemcpyDeviceToDevice, reader));
          CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(reader));
          std::vector<float> seen(2 * kCount);
          CUDA_RETURN_IF_ERROR(
              cudaMemcpy(seen.data(), copy, seen.size() * sizeof(float), cudaMemcpyDeviceToHost));
          for (int r = 0; r < 2 && status.ok(); ++r) {
            const float want = static_cast<float>(10 * round + r + 1);
            for (int64_t i = 0; i < kCount; ++i) {
              if (seen[r * kCount + i] != want) {
                status = absl::InternalError(
                    absl::StrCat("round ", round, ": element ", i, " of rank ", r, "'s block read ",
                                 seen[r * kCount + i], ", want ", want));
                break;
              }
            }
          }
        }
        kernels::IgnoreCudaError(cudaStreamDestroy(reader));
        kernels::IgnoreCudaError(cudaFree(in));
        kernels::IgnoreCudaError(cudaFree(out));
        kernels::IgnoreCudaError(cudaFree(copy));
        return status;
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
}

TEST(CudaTensorParallelTest, ADeviceUuidIsStableAndInNvidiaSmiForm) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::string> first = net::CudaDeviceUuid(0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 40u) << *first;  // GPU- and 36 characters
  EXPECT_EQ(first->rfind("GPU-", 0), 0u) << *first;
  absl::StatusOr<std::string> again = net::CudaDeviceUuid(0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *first);
  EXPECT_FALSE(net::CudaDeviceUuid(4096).ok());
}

TEST(CudaTensorParallelTest, RefusesAHostCommunicatorOnTheDevice) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string path = TinyModelPath();
  net::GlooGroupOptions ranks;
  ranks.size = 2;
  const std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads(ranks, [&](net::Communicator& gloo) -> absl::Status {
        return Transformer::Load(path, &gloo, {.threads = 1, .device = kCuda0}).status();
      });
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("needs a device-memory communicator"), std::string::npos) << s;
  }
}

#if defined(SPLITSPEC_HAVE_NCCL)
// A one-rank group over NCCL (the only NCCL group one GPU allows): the transformer
// joins it on the device and, with nothing to reduce, gives the ungrouped logits bit
// for bit; the communicator itself reduces a device buffer of one rank to itself.
TEST(CudaTensorParallelTest, OneRankGroupOverNcclEqualsNoGroup) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const std::string path = TinyModelPath();
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  auto single = Transformer::Load(path, {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(single.ok()) << single.status();
  auto want = PromptLogits(**single, prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  std::string dir = ::testing::TempDir() + "/cuda-tp1-nccl-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto store = net::FileRendezvousStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto nccl =
      net::NcclCommunicator::Create(**store, {.group = "tp1", .rank = 0, .size = 1}, {.device = 0});
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  auto grouped = Transformer::Load(path, nccl->get(), {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(grouped.ok()) << grouped.status();
  auto got = PromptLogits(**grouped, prompt);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *want);
}

int CudaDeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Two ranks, each on a GPU of its own, over NCCL (never run: needs two GPUs).
TEST(CudaTensorParallelTest, TwoRanksOverNcclOnTwoGpusMatchOneRank) {
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices (NCCL: one rank per GPU)";
  const std::string path = TinyModelPath();
  const std::vector<int32_t> prompt = {1, 7, 3, 9, 12, 5, 2, 8, 30, 4, 11};
  auto single = Transformer::Load(path, {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(single.ok()) << single.status();
  auto want = PromptLogits(**single, prompt);
  ASSERT_TRUE(want.ok()) << want.status();
  std::string dir = ::testing::TempDir() + "/cuda-tp2-nccl-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::vector<std::vector<float>> got(2);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      results[rank] = [&]() -> absl::Status {
        ASSIGN_OR_RETURN(auto store, net::FileRendezvousStore::Open(dir));
        ASSIGN_OR_RETURN(auto nccl,
                         net::NcclCommunicator::Create(
                             *store, {.group = "tp2", .rank = rank, .size = 2}, {.device = rank}));
        const DeviceSpec device{DeviceSpec::Kind::kCuda, rank};
        ASSIGN_OR_RETURN(auto model,
                         Transformer::Load(path, nccl.get(), {.threads = 1, .device = device}));
        ASSIGN_OR_RETURN(got[rank], PromptLogits(*model, prompt));
        return absl::OkStatus();
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_LT(RelativeError(got[0], *want), kTpRelativeBound);
  EXPECT_EQ(got[0], got[1]) << "ranks must hold identical logits";
}
#endif

}  // namespace
}  // namespace splitspec::model
