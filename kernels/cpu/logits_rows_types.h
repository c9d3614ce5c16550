// The flat layout of "logits rows -> probability rows" under per-row sampling
// parameters, shared by the host planner (runtime/spec/device_verify_plan.h)
// and the CUDA kernel (kernels/cuda/sampling.h). Plain data: device pointers
// for the kernel, host pointers where the planner builds the arrays.
//
// Output row r reads logits row row_sources[r] of a [num_logit_rows, vocab]
// matrix with `logits_row_stride` floats between rows (the forward's logits
// stay where the forward wrote them; nothing is gathered on the host), applies
// params[r] exactly as runtime/spec/sampling.h's LogitsToProbs does, and writes
// probs[r * vocab, (r + 1) * vocab).
#ifndef SPLITSPEC_KERNELS_CPU_LOGITS_ROWS_TYPES_H_
#define SPLITSPEC_KERNELS_CPU_LOGITS_ROWS_TYPES_H_

#include <cstdint>

namespace splitspec::kernels {

// One row's sampling transforms (runtime/spec/sampling_params.h without the seed,
// which the verification batch carries per sequence). Validated on the host.
struct RowSamplingParams {
  float temperature = 1.0f;  // 0: one-hot at the argmax of the logits
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
};

// Per-row result codes of the logits -> probs kernel.
enum LogitsRowError : int32_t {
  kLogitsRowOk = 0,
  kLogitsRowNonFinite = 1,  // a logit is NaN or +inf; error_index names the first token
  kLogitsRowAllMasked = 2,  // every logit is -inf
};

struct LogitsToProbsView {
  int32_t num_rows = 0;
  int32_t vocab = 0;
  const float* logits = nullptr;              // [num_logit_rows, logits_row_stride]
  int64_t logits_row_stride = 0;              // >= vocab
  const int64_t* row_sources = nullptr;       // [num_rows] logits row of each output row
  const RowSamplingParams* params = nullptr;  // [num_rows]
  float* probs = nullptr;                     // [num_rows, vocab] output
  int32_t* out_error = nullptr;               // [num_rows] LogitsRowError
  int32_t* out_error_index = nullptr;         // [num_rows] token at fault, -1 if none
};

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_LOGITS_ROWS_TYPES_H_
