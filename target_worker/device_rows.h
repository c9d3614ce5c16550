// DeviceRows: where the target engine keeps the target's distributions when it
// verifies on the device that computed them (TargetEngine::UseDeviceRows). The
// engine then never holds a probability on the host: a row is an index into
// this store, and one Verify call per step sends the draft's tokens and sparse q
// up and brings accept counts and committed ids down (runtime/spec/cuda_verifier.h).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<DeviceRows> rows, NewCudaDeviceRows(0, vocab, 64));
//   RETURN_IF_ERROR(model->KeepLogitsOnDevice(true));
//   engine.UseDeviceRows(std::move(rows));
//
// A store holds logits rows, not probabilities: each row is turned into p under
// its request's sampling parameters inside Verify, on the device, exactly as the
// host path's LogitsToProbs (and, for a guided request, after the guided
// combination of LoadStep, as GuidedLogitsToProbs). Two kinds of rows:
//   - step rows, StepRow(r): row r of the last forward's logits (LoadStep),
//     valid until the next LoadStep;
//   - slot rows, SlotRow(s): one per request slot (0 <= s < slots), where a
//     request's pending p (for its frontier, verified in a later step) is kept.
// Calls are ordered as the engine's step: LoadStep, CopyRowsToHost..., Verify,
// Keep..., EndStep.
//
// Requests the device does not serve. The CUDA verifier makes p with temperature,
// top-k, top-p and min-p only: a request with context processors (logit_bias,
// penalties), a grammar (structured outputs, forced tool calls) or logprobs goes
// through the host pipeline instead (chosen at admission, TargetEngine::AddRequest):
// the engine copies its step rows to the host with CopyRowsToHost (raw logits; its
// guided pairs are not combined by LoadStep) and processes, verifies and keeps
// them exactly as a target without a store does (spec::ProcessRow, the grammar
// masks, spec::LogprobRow, spec::VerifyBatch; its pending p stays on the host).
// Cost: one device-to-host copy, and a wait for it, per such request per step
// that gives it rows: its rows x vocab x 4 bytes (twice that for a guided
// request), e.g. 5 rows of a 49152-token vocabulary = 983040 bytes; the step's
// other requests stay on the device.
// Thread-compatible (the target leader's loop owns it).
#ifndef SPLITSPEC_TARGET_WORKER_DEVICE_ROWS_H_
#define SPLITSPEC_TARGET_WORKER_DEVICE_ROWS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/model/language_model.h"
#include "runtime/spec/device_verify_plan.h"

namespace splitspec::target {

// A guided request's rows of one forward: rows cond_row .. cond_row + rows - 1
// (the conditional sequence) become l_u + scale * (l_c - l_u) with the same
// rows of the unconditional companion from uncond_row (kernels/cpu/guidance.h).
struct GuidedRows {
  int64_t cond_row = 0;
  int64_t uncond_row = 0;
  int64_t rows = 0;
  float scale = 1.0f;
};

class DeviceRows {
 public:
  virtual ~DeviceRows() = default;

  virtual int slots() const = 0;

  // Takes the forward's logits (out.device_logits for a device store, in any of
  // ForwardOutput's block layouts: a group leader's blocks are put in vocabulary
  // order) as this step's rows and applies every guided combination in place. Errors:
  // InvalidArgument if `out` has no logits where the store needs them or a
  // guided span lies outside them; a failed copy or launch (Internal,
  // ResourceExhausted). After an error the step rows are unspecified.
  virtual absl::Status LoadStep(const model::ForwardOutput& out,
                                absl::Span<const GuidedRows> guided) = 0;

  // Index of step row r / of slot s, as DeviceVerifyRequest::logit_rows takes it.
  virtual int64_t StepRow(int64_t r) const = 0;
  virtual int64_t SlotRow(int s) const = 0;

  // Copies `count` consecutive rows from store index `row` (StepRow / SlotRow
  // indices; step rows as LoadStep left them) into `host`, [count, vocab] floats,
  // and waits for the copy. Errors: InvalidArgument if the rows lie outside the
  // store or `host` does not hold count x vocab floats; a failed copy (Internal).
  // `host` is unspecified after an error; the store is unchanged either way.
  virtual absl::Status CopyRowsToHost(int64_t row, int64_t count, absl::Span<float> host) = 0;

  // Verifies over the store's rows (requests' logit_rows are StepRow / SlotRow
  // indices). Errors and outcomes as spec::VerifyOnHost / CudaVerifier::Verify.
  virtual absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> Verify(
      absl::Span<const spec::DeviceVerifyRequest> requests) = 0;

  // Copies row `row` into slot `slot` (nothing if it is that slot's row). A
  // failure is kept and returned by EndStep.
  virtual void Keep(int64_t row, int slot) = 0;

  // Waits for the step's copies and returns the first error of the step (once).
  virtual absl::Status EndStep() = 0;
};

// The CUDA store on `device`: one device allocation of [slots + step rows, vocab]
// floats, grown (slots kept) when a forward has more rows than any before.
// FailedPrecondition in a build without CUDA or for a device that does not
// exist; ResourceExhausted naming the device and bytes if the slots do not fit.
absl::StatusOr<std::unique_ptr<DeviceRows>> NewCudaDeviceRows(int device, int vocab, int slots);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_DEVICE_ROWS_H_
