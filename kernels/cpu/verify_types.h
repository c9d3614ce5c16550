// The flat, request-agnostic batch layout shared by the CPU reference
// (kernels/cpu/verify.h) and the CUDA twin (kernels/cuda/verify.h) of
// speculative verification. Plain data: the same struct carries host pointers
// to the CPU kernel and device pointers to the CUDA launcher.
//
// A batch holds `num_sequences` draft blocks with ragged lengths k_s >= 0.
// Draft tokens are concatenated: sequence s owns draft_tokens[draft_offsets[s],
// draft_offsets[s + 1]). Target rows are concatenated the same way with one
// extra row per sequence (the distribution after the last draft token), so
// sequence s owns probs rows [draft_offsets[s] + s, draft_offsets[s + 1] + s + 1):
// row i is the target distribution p_i for position start_positions[s] + i.
#ifndef SPLITSPEC_KERNELS_CPU_VERIFY_TYPES_H_
#define SPLITSPEC_KERNELS_CPU_VERIFY_TYPES_H_

#include <cstdint>

namespace splitspec::kernels {

// Verification rule of one sequence (see runtime/spec/verify.h for the math).
enum VerifyModeCode : int32_t {
  kVerifyGreedy = 0,     // accept iff token == argmax p; correction/bonus = argmax p
  kVerifyRejection = 1,  // accept with min(1, p/q); correction ~ norm(max(0, p - q)); bonus ~ p
  kVerifyCoupled = 2,    // accept iff token == argmax(log p + Gumbel(seed, position))
};

// How q (the draft's distributions, read only by rejection-mode sequences) is stored.
enum DraftQFormat : int32_t {
  kDraftQNone = 0,    // no q: the batch must hold no rejection-mode sequence with k > 0
  kDraftQSparse = 1,  // CSR over draft tokens: row g = ids/probs [q_offsets[g], q_offsets[g + 1])
  kDraftQDense = 2,   // q_probs [num_draft_tokens, vocab]
};

// Per-sequence result codes. On any error the sequence reports accepted = 0,
// num_committed = 0, rejected = 0, and error_index names the draft index (or -1).
enum VerifyErrorCode : int32_t {
  kVerifyOk = 0,
  kVerifyBadMode = 1,          // modes[s] is not a VerifyModeCode
  kVerifyBadShape = 2,         // draft_offsets not non-decreasing
  kVerifyTokenOutOfRange = 3,  // a draft token outside [0, vocab)
  kVerifyTokenHasZeroQ = 4,    // rejection: q_i(x_i) == 0, the draft cannot have sampled x_i
  kVerifyBadDraftQ = 5,        // q missing, or an entry negative/non-finite/out of range
  kVerifyBadTargetRow = 6,     // a p entry negative/non-finite, or a row with no mass
};

struct VerifyBatchView {
  int32_t num_sequences = 0;
  int32_t vocab = 0;

  // Inputs, per sequence [num_sequences] (draft_offsets: [num_sequences + 1], starts at 0).
  const int32_t* modes = nullptr;  // VerifyModeCode
  const int32_t* draft_offsets = nullptr;
  const uint64_t* seeds = nullptr;           // request seed: the Philox key
  const int64_t* start_positions = nullptr;  // position of the first draft token
  const uint8_t* want_bonus = nullptr;       // 1: on full acceptance commit a token from p_{k+1}

  // Inputs, per token.
  const int32_t* draft_tokens = nullptr;  // [num_draft_tokens]
  const float* probs = nullptr;           // [num_draft_tokens + num_sequences, vocab]

  int32_t q_format = kDraftQNone;
  const int32_t* q_offsets = nullptr;  // sparse: [num_draft_tokens + 1]
  const int32_t* q_ids = nullptr;      // sparse: [q_offsets[num_draft_tokens]], unique per row
  const float* q_probs =
      nullptr;  // sparse: [q_offsets[num_draft_tokens]]; dense: [num_draft_tokens, vocab]

  // Workspace [num_sequences, vocab] for the rejection residual. The CUDA
  // launcher requires it; the CPU reference ignores it (it uses its own).
  float* scratch = nullptr;

  // Outputs, per sequence [num_sequences].
  int32_t* out_accepted = nullptr;       // draft tokens accepted (a prefix of the block)
  int32_t* out_num_committed = nullptr;  // accepted + (1 if a correction or bonus was committed)
  uint8_t* out_rejected = nullptr;       // 1 if a draft token was rejected
  int32_t* out_error = nullptr;          // VerifyErrorCode
  int32_t* out_error_index = nullptr;    // draft index at fault (k for the bonus row), -1 if none
  // Output [num_draft_tokens + num_sequences]: sequence s writes its committed
  // tokens at [draft_offsets[s] + s, ... + out_num_committed[s]).
  int32_t* out_committed = nullptr;
};

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_VERIFY_TYPES_H_
