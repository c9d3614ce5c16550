#include "kernels/cpu/verify.h"

#include <vector>

#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"

namespace splitspec::kernels {
namespace {

// What one sequence's verification produced.
struct SequenceResult {
  int32_t accepted = 0;
  int32_t num_committed = 0;
  bool rejected = false;
  int32_t error = kVerifyOk;
  int32_t error_index = -1;
};

// q_g(token) for global draft index g, or -1 when q is malformed at that row.
float DraftQAt(const VerifyBatchView& view, int64_t g, int32_t token) {
  if (view.q_format == kDraftQDense) {
    const float q = view.q_probs[g * view.vocab + token];
    return IsValidWeight(q) ? q : -1.0f;
  }
  if (view.q_format != kDraftQSparse) return -1.0f;
  float found = 0.0f;
  for (int32_t j = view.q_offsets[g]; j < view.q_offsets[g + 1]; ++j) {
    const int32_t id = view.q_ids[j];
    const float q = view.q_probs[j];
    if (id < 0 || id >= view.vocab || !IsValidWeight(q)) return -1.0f;
    if (id == token) found = q;
  }
  return found;
}

// residual[v] = max(0, p[v] - q_g[v]) in float. Returns kVerifyOk, or
// kVerifyBadTargetRow if p is malformed (checked first), else kVerifyBadDraftQ.
int32_t BuildResidual(const VerifyBatchView& view, int64_t g, const float* p, float* residual) {
  const int32_t vocab = view.vocab;
  if (view.q_format == kDraftQDense) {
    for (int32_t v = 0; v < vocab; ++v) {
      if (!IsValidWeight(p[v])) return kVerifyBadTargetRow;
    }
    const float* q = view.q_probs + g * vocab;
    for (int32_t v = 0; v < vocab; ++v) {
      if (!IsValidWeight(q[v])) return kVerifyBadDraftQ;
      const float r = p[v] - q[v];
      residual[v] = r > 0.0f ? r : 0.0f;
    }
    return kVerifyOk;
  }
  const int32_t first = view.q_offsets[g];
  return SparseRejectionResidual(p, vocab, view.q_ids + first, view.q_probs + first,
                                 view.q_offsets[g + 1] - first, residual);
}

// The mode's own choice from row p at `position` (greedy/coupled target token,
// or a rejection-mode bonus sample). -1 if the row is malformed.
int32_t ChooseFromRow(int32_t mode, const float* p, int32_t vocab, uint64_t seed,
                      int64_t position) {
  switch (mode) {
    case kVerifyGreedy:
      return ArgmaxProbs(p, vocab);
    case kVerifyCoupled:
      return GumbelArgmax(p, vocab, seed, position);
    default:
      return SampleFromWeights(p, vocab, UniformDouble(seed, position, RandomPurpose::kSample));
  }
}

SequenceResult VerifySequence(const VerifyBatchView& view, int32_t s,
                              std::vector<float>& residual) {
  SequenceResult result;
  auto fail = [&result](int32_t code, int32_t index) {
    result = SequenceResult{};
    result.error = code;
    result.error_index = index;
    return result;
  };
  const int32_t mode = view.modes[s];
  if (mode != kVerifyGreedy && mode != kVerifyRejection && mode != kVerifyCoupled) {
    return fail(kVerifyBadMode, -1);
  }
  const int32_t begin = view.draft_offsets[s];
  const int32_t k = view.draft_offsets[s + 1] - begin;
  if (begin < 0 || k < 0) return fail(kVerifyBadShape, -1);
  if (mode == kVerifyRejection && k > 0 && view.q_format == kDraftQNone)
    return fail(kVerifyBadDraftQ, 0);

  const int32_t vocab = view.vocab;
  const uint64_t seed = view.seeds[s];
  const int64_t start = view.start_positions[s];
  const float* rows = view.probs + (static_cast<int64_t>(begin) + s) * vocab;
  int32_t* out = view.out_committed + begin + s;

  for (int32_t i = 0; i < k; ++i) {
    const int64_t g = begin + i;
    const int32_t token = view.draft_tokens[g];
    const float* p = rows + static_cast<int64_t>(i) * vocab;
    const int64_t position = start + i;
    if (token < 0 || token >= vocab) return fail(kVerifyTokenOutOfRange, i);

    int32_t correction = -1;
    if (mode == kVerifyRejection) {
      const float q = DraftQAt(view, g, token);
      if (q < 0.0f) return fail(kVerifyBadDraftQ, i);
      if (q == 0.0f) return fail(kVerifyTokenHasZeroQ, i);
      if (!IsValidWeight(p[token])) return fail(kVerifyBadTargetRow, i);
      const double u = UniformDouble(seed, position, RandomPurpose::kAcceptTest);
      if (u < static_cast<double>(p[token]) / static_cast<double>(q)) {
        out[result.accepted++] = token;
        continue;
      }
      if (residual.empty()) residual.resize(vocab);  // rejection only: no page for the rest
      const int32_t residual_error = BuildResidual(view, g, p, residual.data());
      if (residual_error != kVerifyOk) return fail(residual_error, i);
      const double u_residual = UniformDouble(seed, position, RandomPurpose::kResidual);
      correction = SampleFromWeights(residual.data(), vocab, u_residual);
      if (correction < 0) correction = SampleFromWeights(p, vocab, u_residual);
    } else {
      correction = ChooseFromRow(mode, p, vocab, seed, position);
      if (correction == token) {
        out[result.accepted++] = token;
        continue;
      }
    }
    if (correction < 0) return fail(kVerifyBadTargetRow, i);
    out[result.accepted] = correction;
    result.num_committed = result.accepted + 1;
    result.rejected = true;
    return result;
  }
  result.num_committed = result.accepted;
  if (view.want_bonus[s]) {
    const int32_t bonus =
        ChooseFromRow(mode, rows + static_cast<int64_t>(k) * vocab, vocab, seed, start + k);
    if (bonus < 0) return fail(kVerifyBadTargetRow, k);
    out[result.num_committed++] = bonus;
  }
  return result;
}

}  // namespace

int32_t SparseRejectionResidual(const float* p, int32_t vocab, const int32_t* q_ids,
                                const float* q_probs, int32_t q_size, float* residual) {
  for (int32_t v = 0; v < vocab; ++v) {
    if (!IsValidWeight(p[v])) return kVerifyBadTargetRow;
    residual[v] = p[v];
  }
  for (int32_t j = 0; j < q_size; ++j) {
    const int32_t id = q_ids[j];
    if (id < 0 || id >= vocab || !IsValidWeight(q_probs[j])) return kVerifyBadDraftQ;
    const float r = p[id] - q_probs[j];
    residual[id] = r > 0.0f ? r : 0.0f;
  }
  return kVerifyOk;
}

void VerifyBatchReference(const VerifyBatchView& view) {
  std::vector<float> residual;  // sized by the first rejection-mode row that needs it
  for (int32_t s = 0; s < view.num_sequences; ++s) {
    const SequenceResult r = view.vocab > 0 ? VerifySequence(view, s, residual)
                                            : SequenceResult{0, 0, false, kVerifyBadShape, -1};
    view.out_accepted[s] = r.accepted;
    view.out_num_committed[s] = r.num_committed;
    view.out_rejected[s] = r.rejected ? 1 : 0;
    view.out_error[s] = r.error;
    view.out_error_index[s] = r.error_index;
  }
}

}  // namespace splitspec::kernels
