#include "tests/testing/random_verify_batch.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/types/span.h"
#include "kernels/cpu/sampling_philox.h"
#include "runtime/spec/sampling.h"

namespace splitspec::testing {
namespace {

spec::SamplingParams RandomParams(std::mt19937_64& rng) {
  const float temperatures[] = {0.0f, 0.7f, 1.0f, 1.5f};
  const int32_t top_ks[] = {0, 0, 1, 5, 40};
  const float top_ps[] = {1.0f, 1.0f, 0.9f, 0.5f};
  const float min_ps[] = {0.0f, 0.0f, 0.05f, 0.2f};
  spec::SamplingParams p;
  p.temperature = temperatures[rng() % 4];
  p.top_k = top_ks[rng() % 5];
  p.top_p = top_ps[rng() % 4];
  p.min_p = min_ps[rng() % 4];
  p.seed = rng();
  return p;
}

std::vector<float> HostProbs(const spec::SamplingParams& params, const float* logits, int vocab) {
  std::vector<float> probs(vocab);
  if (!spec::LogitsToProbs(params, absl::MakeConstSpan(logits, vocab), absl::MakeSpan(probs))
           .ok()) {
    probs.assign(vocab, 0.0f);
  }
  return probs;
}

// A draft token for row p: usually the target's own choice or a sample of a q
// made from slightly different logits; sometimes any token.
void AddDraftToken(const RandomVerifyBatch& b, spec::VerifyMode mode,
                   const spec::SamplingParams& params, const std::vector<float>& p,
                   const float* logits, int64_t position, std::mt19937_64& rng,
                   std::vector<int32_t>* tokens, std::vector<spec::SparseDistribution>* q) {
  if (mode == spec::VerifyMode::kRejection) {
    std::vector<float> nudged(logits, logits + b.vocab);
    for (float& x : nudged) x += std::isfinite(x) ? static_cast<float>(rng() % 3) / 8.0f : 0.0f;
    spec::SamplingParams draft = params;
    draft.temperature = std::max(0.5f, params.temperature);
    absl::StatusOr<spec::SparseDistribution> top =
        spec::TopQDistribution(HostProbs(draft, nudged.data(), b.vocab), 16);
    const spec::SparseDistribution dist = *std::move(top);
    std::discrete_distribution<int> pick(dist.probs.begin(), dist.probs.end());
    tokens->push_back(dist.token_ids[pick(rng)]);
    q->push_back(dist);
    return;
  }
  absl::StatusOr<int32_t> own = spec::ChooseTargetToken(mode, p, params.seed, position);
  tokens->push_back(rng() % 4 != 0 && own.ok() ? *own : static_cast<int32_t>(rng() % b.vocab));
}

}  // namespace

RandomVerifyBatch MakeRandomVerifyBatch(int32_t vocab, int num_requests, uint64_t seed) {
  std::mt19937_64 rng(seed);
  RandomVerifyBatch b;
  b.vocab = vocab;
  b.row_stride = vocab + 3;
  std::vector<int> ks(num_requests);
  int64_t total_rows = 0;
  for (int& k : ks) total_rows += (k = static_cast<int>(rng() % 7)) + 1;
  b.num_logit_rows = total_rows + 5;
  b.logits.assign(b.num_logit_rows * b.row_stride, NAN);  // padding is never read
  for (int64_t r = 0; r < b.num_logit_rows; ++r) {
    for (int32_t v = 0; v < vocab; ++v) {
      b.logits[r * b.row_stride + v] =
          rng() % 20 == 0 ? -INFINITY
                          : static_cast<float>(static_cast<int>(rng() % 64) - 32) / 8.0f;
    }
    b.logits[r * b.row_stride + rng() % vocab] = 1.0f;  // at least one finite logit
  }
  std::vector<int64_t> order(b.num_logit_rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  b.rows.resize(num_requests);
  b.tokens.resize(num_requests);
  b.q.resize(num_requests);
  b.requests.resize(num_requests);
  size_t next_row = 0;
  for (int j = 0; j < num_requests; ++j) {
    spec::DeviceVerifyRequest& r = b.requests[j];
    r.mode = static_cast<spec::VerifyMode>(rng() % 3);
    r.params = RandomParams(rng);
    r.start_position = static_cast<int64_t>(rng() % 100000);
    r.want_bonus = rng() % 4 != 0;
    for (int i = 0; i <= ks[j]; ++i) b.rows[j].push_back(order[next_row++]);
    for (int i = 0; i < ks[j]; ++i) {
      const float* logits = b.logits.data() + b.rows[j][i] * b.row_stride;
      AddDraftToken(b, r.mode, r.params, HostProbs(r.params, logits, vocab), logits,
                    r.start_position + i, rng, &b.tokens[j], &b.q[j]);
    }
  }
  for (int j = 0; j < num_requests; ++j) {
    b.requests[j].logit_rows = b.rows[j];
    b.requests[j].draft_tokens = b.tokens[j];
    b.requests[j].draft_q = b.q[j];
  }
  return b;
}

std::vector<spec::VerifyRequest> HostVerifyRequests(
    const RandomVerifyBatch& batch, std::vector<std::vector<float>>* probs_storage) {
  probs_storage->assign(batch.requests.size(), {});
  std::vector<spec::VerifyRequest> out;
  for (size_t j = 0; j < batch.requests.size(); ++j) {
    const spec::DeviceVerifyRequest& r = batch.requests[j];
    for (int64_t row : r.logit_rows) {
      const std::vector<float> p =
          HostProbs(r.params, batch.logits.data() + row * batch.row_stride, batch.vocab);
      (*probs_storage)[j].insert((*probs_storage)[j].end(), p.begin(), p.end());
    }
    spec::VerifyRequest v;
    v.mode = r.mode;
    v.target_probs = (*probs_storage)[j];
    v.draft_tokens = r.draft_tokens;
    if (r.mode == spec::VerifyMode::kRejection) v.draft_q_sparse = r.draft_q;
    v.seed = r.params.seed;
    v.start_position = r.start_position;
    v.want_bonus = r.want_bonus;
    out.push_back(v);
  }
  return out;
}

}  // namespace splitspec::testing
