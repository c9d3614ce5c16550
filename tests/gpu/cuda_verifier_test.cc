// Verification on the device (runtime/spec/cuda_verifier.h): the logits -> probs
// kernel against the CPU's LogitsToProbs (same support, each probability within
// a relative 1e-5; every output element written: the buffer is poisoned first),
// and the verifier's outcomes against the CPU executor of the same plan
// (VerifyOnHost) on random batches of every mode and sampling parameter, with
// only the plan's bytes crossing. Skips without a device.
#include "runtime/spec/cuda_verifier.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/logits_rows_types.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"
#include "runtime/spec/sampling.h"
#include "tests/testing/random_verify_batch.h"

namespace splitspec::spec {
namespace {

constexpr double kProbRelativeBound = 1e-5;

// A device copy of a host vector, freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(1, size_) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(data_); }
  T* get() const { return data_; }
  std::vector<T> Download() const {
    std::vector<T> host(size_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t size_;
};

std::vector<float> Poison(size_t n) {
  std::vector<float> v(n);
  std::memset(v.data(), 0xff, n * sizeof(float));  // NaN everywhere
  return v;
}

void ExpectCloseToCpu(const float* logits, const SamplingParams& params, const float* got,
                      int vocab, const std::string& what) {
  std::vector<float> want(vocab);
  ASSERT_TRUE(LogitsToProbs(params, absl::MakeConstSpan(logits, vocab), absl::MakeSpan(want)).ok());
  for (int v = 0; v < vocab; ++v) {
    ASSERT_EQ(got[v] == 0.0f, want[v] == 0.0f)
        << what << " token " << v << ": " << got[v] << " vs " << want[v];
    ASSERT_LE(std::fabs(got[v] - want[v]), kProbRelativeBound * want[v])
        << what << " token " << v << ": " << got[v] << " vs " << want[v];
  }
}

TEST(CudaLogitsToProbsTest, MatchesTheCpuRowForRow) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  for (int32_t vocab : {2, 300, 49152}) {
    const testing::RandomVerifyBatch b = testing::MakeRandomVerifyBatch(vocab, 40, vocab);
    std::vector<int64_t> sources;
    std::vector<kernels::RowSamplingParams> params;
    std::vector<SamplingParams> host_params;
    for (const DeviceVerifyRequest& r : b.requests) {
      for (int64_t row : r.logit_rows) {
        sources.push_back(row);
        params.push_back(RowParams(r.params));
        host_params.push_back(r.params);
      }
    }
    const DeviceArray<float> d_logits(b.logits);
    const DeviceArray<int64_t> d_sources(sources);
    const DeviceArray<kernels::RowSamplingParams> d_params(params);
    const DeviceArray<float> d_probs(Poison(sources.size() * vocab));
    const DeviceArray<int32_t> d_error(std::vector<int32_t>(sources.size(), -7));
    const DeviceArray<int32_t> d_index(std::vector<int32_t>(sources.size(), -7));
    kernels::LogitsToProbsView view;
    view.num_rows = static_cast<int32_t>(sources.size());
    view.vocab = vocab;
    view.logits = d_logits.get();
    view.logits_row_stride = b.row_stride;
    view.row_sources = d_sources.get();
    view.params = d_params.get();
    view.probs = d_probs.get();
    view.out_error = d_error.get();
    view.out_error_index = d_index.get();
    ASSERT_TRUE(kernels::LaunchLogitsToProbs(view, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> probs = d_probs.Download();
    const std::vector<int32_t> errors = d_error.Download(), indices = d_index.Download();
    for (size_t r = 0; r < sources.size(); ++r) {
      ASSERT_EQ(errors[r], kernels::kLogitsRowOk) << "row " << r;
      ASSERT_EQ(indices[r], -1) << "row " << r;
      ExpectCloseToCpu(b.logits.data() + sources[r] * b.row_stride, host_params[r],
                       probs.data() + r * vocab, vocab,
                       "vocab " + std::to_string(vocab) + " row " + std::to_string(r));
    }
  }
}

TEST(CudaLogitsToProbsTest, NamesTheBadLogitOfARow) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const int vocab = 700;
  std::vector<float> logits(3 * vocab, 0.25f);
  logits[0 * vocab + 650] = NAN;
  logits[0 * vocab + 651] = INFINITY;
  for (int v = 0; v < vocab; ++v) logits[1 * vocab + v] = -INFINITY;
  const DeviceArray<float> d_logits(logits);
  const DeviceArray<int64_t> d_sources(std::vector<int64_t>{0, 1, 2});
  const DeviceArray<kernels::RowSamplingParams> d_params(
      std::vector<kernels::RowSamplingParams>(3));
  const DeviceArray<float> d_probs(Poison(3 * vocab));
  const DeviceArray<int32_t> d_error(std::vector<int32_t>(3, -7)), d_index(d_error.Download());
  kernels::LogitsToProbsView view;
  view.num_rows = 3;
  view.vocab = vocab;
  view.logits = d_logits.get();
  view.logits_row_stride = vocab;
  view.row_sources = d_sources.get();
  view.params = d_params.get();
  view.probs = d_probs.get();
  view.out_error = d_error.get();
  view.out_error_index = d_index.get();
  ASSERT_TRUE(kernels::LaunchLogitsToProbs(view, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(d_error.Download(),
            (std::vector<int32_t>{kernels::kLogitsRowNonFinite, kernels::kLogitsRowAllMasked,
                                  kernels::kLogitsRowOk}));
  EXPECT_EQ(d_index.Download(), (std::vector<int32_t>{650, -1, -1}));
  const std::vector<float> probs = d_probs.Download();
  EXPECT_EQ(probs[0], 0.0f);  // a bad row is zeroed, not left as it was
  EXPECT_FLOAT_EQ(probs[2 * vocab + 5], 1.0f / vocab);
  view.logits_row_stride = vocab - 1;
  EXPECT_EQ(kernels::LaunchLogitsToProbs(view, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaVerifierTest, EqualsTheHostExecutorOfThePlan) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::unique_ptr<CudaVerifier>> verifier = CudaVerifier::Create(0);
  ASSERT_TRUE(verifier.ok()) << verifier.status();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  int verified = 0, accepted = 0;
  for (int32_t vocab : {2, 300, 5000, 49152}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const testing::RandomVerifyBatch b = testing::MakeRandomVerifyBatch(vocab, 32, seed);
      const DeviceArray<float> d_logits(b.logits);
      auto got = (*verifier)->Verify(b.requests, d_logits.get(), b.num_logit_rows, b.row_stride,
                                     vocab, stream);
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = VerifyOnHost(b.requests, b.logits, b.row_stride, vocab);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_EQ(got->size(), want->size());
      for (size_t j = 0; j < got->size(); ++j) {
        const auto& g = (*got)[j];
        const auto& w = (*want)[j];
        ASSERT_EQ(g.ok(), w.ok()) << "vocab " << vocab << " request " << j << ": " << g.status();
        if (!g.ok()) continue;
        EXPECT_EQ(g->committed, w->committed) << "vocab " << vocab << " request " << j;
        EXPECT_EQ(g->accepted, w->accepted);
        EXPECT_EQ(g->rejected, w->rejected);
        ++verified;
        accepted += g->accepted;
      }
      std::vector<absl::StatusOr<VerifyOutcome>> unused;
      const VerifyUpload plan = *PlanDeviceVerify(b.requests, vocab, b.num_logit_rows, &unused);
      EXPECT_EQ((*verifier)->last_transfer().up_bytes, plan.Bytes());
      EXPECT_EQ((*verifier)->last_transfer().down_bytes, VerifyDownload::For(plan).Bytes());
    }
  }
  EXPECT_GT(verified, 300);
  EXPECT_GT(accepted, 100);
  cudaStreamDestroy(stream);
}

TEST(CudaVerifierTest, RefusesAMissingDevice) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::unique_ptr<CudaVerifier>> verifier = CudaVerifier::Create(4096);
  EXPECT_EQ(verifier.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(verifier.status().message().find("cuda:4096"), std::string::npos);
}

}  // namespace
}  // namespace splitspec::spec
