// CUDA verification against the CPU reference (kernels/cpu/verify.h) on fresh
// random batches: ragged k (0 included), all three modes, sparse and dense q,
// vocabularies smaller and larger than a thread block, and malformed sequences.
#include "kernels/cuda/verify.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "kernels/cpu/verify.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

// Host-side batch with its outputs; layout as in kernels/cpu/verify_types.h.
struct HostBatch {
  int vocab = 0;
  std::vector<int32_t> modes, draft_offsets{0}, draft_tokens, q_offsets{0}, q_ids;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> start_positions;
  std::vector<uint8_t> want_bonus;
  std::vector<float> probs, q_probs;
  int32_t q_format = kDraftQSparse;
  // Outputs.
  std::vector<int32_t> accepted, num_committed, error, error_index, committed;
  std::vector<uint8_t> rejected;
};

std::vector<float> RandomRow(int vocab, std::mt19937_64& rng, double zero_fraction) {
  std::exponential_distribution<float> exponential(1.0f);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<float> row(vocab);
  double total = 0.0;
  for (float& x : row) total += (x = coin(rng) < zero_fraction ? 0.0f : exponential(rng));
  if (total == 0.0) row[0] = 1.0f, total = 1.0;
  for (float& x : row) x = static_cast<float>(x / total);
  return row;
}

// A random batch: the draft samples each token from its q (so most blocks are
// valid); the last sequences carry a q = 0 token, an out-of-range token and a NaN row.
HostBatch RandomBatch(int vocab, int num_sequences, int32_t q_format, std::mt19937_64& rng) {
  HostBatch b;
  b.vocab = vocab;
  b.q_format = q_format;
  for (int s = 0; s < num_sequences; ++s) {
    const int k = static_cast<int>(rng() % 8);
    b.modes.push_back(static_cast<int32_t>(rng() % 3));
    b.seeds.push_back(rng());
    b.start_positions.push_back(static_cast<int64_t>(rng() % 100000));
    b.want_bonus.push_back(rng() % 4 != 0);
    for (int i = 0; i <= k; ++i) {
      const std::vector<float> p = RandomRow(vocab, rng, 0.3);
      b.probs.insert(b.probs.end(), p.begin(), p.end());
      if (i == k) break;
      // q: a perturbation of p half the time (long accepted runs), else independent.
      std::vector<float> q = rng() % 2 ? p : RandomRow(vocab, rng, 0.3);
      if (rng() % 2) q = RandomRow(vocab, rng, 0.5);
      const double u = std::uniform_real_distribution<double>(1e-9, 1.0 - 1e-9)(rng);
      int token = SampleFromWeights(q.data(), vocab, u);
      if (b.modes.back() == kVerifyGreedy && rng() % 2) token = ArgmaxProbs(p.data(), vocab);
      b.draft_tokens.push_back(token);
      if (q_format == kDraftQDense) {
        b.q_probs.insert(b.q_probs.end(), q.begin(), q.end());
      } else {
        for (int v = 0; v < vocab; ++v) {
          if (q[v] > 0.0f) b.q_ids.push_back(v), b.q_probs.push_back(q[v]);
        }
        b.q_offsets.push_back(static_cast<int32_t>(b.q_ids.size()));
      }
    }
    b.draft_offsets.push_back(static_cast<int32_t>(b.draft_tokens.size()));
  }
  // Malformed sequences at the end (when they have draft tokens).
  const int n = num_sequences;
  if (n >= 3) {
    const int bad_token_seq = n - 2, nan_seq = n - 1;
    if (b.draft_offsets[bad_token_seq + 1] > b.draft_offsets[bad_token_seq]) {
      b.draft_tokens[b.draft_offsets[bad_token_seq]] = vocab + 3;
    }
    b.probs[(static_cast<int64_t>(b.draft_offsets[nan_seq]) + nan_seq) * vocab + vocab / 2] = NAN;
  }
  return b;
}

VerifyBatchView HostView(HostBatch& b) {
  const int n = static_cast<int>(b.modes.size());
  b.accepted.assign(n, -7);
  b.num_committed.assign(n, -7);
  b.error.assign(n, -7);
  b.error_index.assign(n, -7);
  b.rejected.assign(n, 7);
  b.committed.assign(b.draft_tokens.size() + n, -7);
  VerifyBatchView v;
  v.num_sequences = n;
  v.vocab = b.vocab;
  v.modes = b.modes.data();
  v.draft_offsets = b.draft_offsets.data();
  v.seeds = b.seeds.data();
  v.start_positions = b.start_positions.data();
  v.want_bonus = b.want_bonus.data();
  v.draft_tokens = b.draft_tokens.data();
  v.probs = b.probs.data();
  v.q_format = b.q_format;
  v.q_offsets = b.q_offsets.data();
  v.q_ids = b.q_ids.data();
  v.q_probs = b.q_probs.data();
  v.out_accepted = b.accepted.data();
  v.out_num_committed = b.num_committed.data();
  v.out_rejected = b.rejected.data();
  v.out_error = b.error.data();
  v.out_error_index = b.error_index.data();
  v.out_committed = b.committed.data();
  return v;
}

// Device copies of a host vector, freed on destruction.
class DeviceBuffers {
 public:
  ~DeviceBuffers() {
    for (void* p : owned_) cudaFree(p);
  }
  template <typename T>
  T* Copy(const std::vector<T>& host) {
    void* d = nullptr;
    const size_t bytes = std::max<size_t>(1, host.size()) * sizeof(T);
    EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
    owned_.push_back(d);
    if (!host.empty()) {
      EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    return static_cast<T*>(d);
  }
  template <typename T>
  void Back(const T* d, std::vector<T>& host) {
    ASSERT_EQ(cudaMemcpy(host.data(), d, host.size() * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }

 private:
  std::vector<void*> owned_;
};

void RunOnDevice(HostBatch& b) {
  VerifyBatchView host = HostView(b);  // sets output sizes
  DeviceBuffers d;
  VerifyBatchView v = host;
  v.modes = d.Copy(b.modes);
  v.draft_offsets = d.Copy(b.draft_offsets);
  v.seeds = d.Copy(b.seeds);
  v.start_positions = d.Copy(b.start_positions);
  v.want_bonus = d.Copy(b.want_bonus);
  v.draft_tokens = d.Copy(b.draft_tokens);
  v.probs = d.Copy(b.probs);
  v.q_offsets = d.Copy(b.q_offsets);
  v.q_ids = d.Copy(b.q_ids);
  v.q_probs = d.Copy(b.q_probs);
  v.scratch = d.Copy(std::vector<float>(static_cast<size_t>(b.modes.size()) * b.vocab));
  v.out_accepted = d.Copy(b.accepted);
  v.out_num_committed = d.Copy(b.num_committed);
  v.out_rejected = d.Copy(b.rejected);
  v.out_error = d.Copy(b.error);
  v.out_error_index = d.Copy(b.error_index);
  v.out_committed = d.Copy(b.committed);
  const absl::Status status = LaunchVerifyBatch(v, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  d.Back(v.out_accepted, b.accepted);
  d.Back(v.out_num_committed, b.num_committed);
  d.Back(v.out_rejected, b.rejected);
  d.Back(v.out_error, b.error);
  d.Back(v.out_error_index, b.error_index);
  d.Back(v.out_committed, b.committed);
}

TEST(VerifyCudaTest, MatchesCpuReferenceOnRaggedBatches) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(std::random_device{}());
  int rejected_total = 0, accepted_total = 0;
  for (int vocab : {1, 5, 255, 257, 4099, 32000}) {
    for (int32_t q_format : {kDraftQSparse, kDraftQDense}) {
      const int num_sequences = vocab >= 4099 ? 24 : 96;
      HostBatch cpu = RandomBatch(vocab, num_sequences, q_format, rng);
      HostBatch gpu = cpu;
      VerifyBatchReference(HostView(cpu));
      RunOnDevice(gpu);
      for (int s = 0; s < num_sequences; ++s) {
        SCOPED_TRACE(testing::Message() << "vocab=" << vocab << " q_format=" << q_format
                                        << " s=" << s << " mode=" << cpu.modes[s]);
        ASSERT_EQ(gpu.error[s], cpu.error[s]);
        ASSERT_EQ(gpu.error_index[s], cpu.error_index[s]);
        ASSERT_EQ(gpu.accepted[s], cpu.accepted[s]);
        ASSERT_EQ(gpu.num_committed[s], cpu.num_committed[s]);
        ASSERT_EQ(gpu.rejected[s], cpu.rejected[s]);
        const int first = cpu.draft_offsets[s] + s;
        for (int j = 0; j < cpu.num_committed[s]; ++j)
          ASSERT_EQ(gpu.committed[first + j], cpu.committed[first + j]);
        rejected_total += cpu.rejected[s];
        accepted_total += cpu.accepted[s];
      }
    }
  }
  // The batches exercise both paths (each occurs in dozens of sequences).
  EXPECT_GT(rejected_total, 0);
  EXPECT_GT(accepted_total, 0);
}

TEST(VerifyCudaTest, RejectsBadArgumentsNamingThem) {
  VerifyBatchView view;
  view.num_sequences = 1;
  view.vocab = 0;
  EXPECT_NE(LaunchVerifyBatch(view, nullptr).message().find("vocab=0"), std::string::npos);
  view.vocab = 10;
  EXPECT_NE(LaunchVerifyBatch(view, nullptr).message().find("modes is null"), std::string::npos);
  view.num_sequences = 0;
  EXPECT_TRUE(LaunchVerifyBatch(view, nullptr).ok());
}

}  // namespace
}  // namespace splitspec::kernels
