// CudaVerifier: verification on the CUDA device that holds the target's logits
// (CUDA builds only). The probabilities are made on the device from the logits
// (kernels/cuda/sampling.h) and verified there (kernels/cuda/verify.h); per call
// exactly one copy goes up (the plan's VerifyUpload, packed) and one comes down
// (VerifyDownload): accept counts, committed ids and error codes. Neither grows
// with the vocabulary (runtime/spec/device_verify_plan.h states what is in them).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CudaVerifier> verifier, CudaVerifier::Create(/*device=*/0));
//   ASSIGN_OR_RETURN(auto outcomes,
//                    verifier->Verify(requests, d_logits, rows, row_stride, vocab, stream));
//
// Outcomes equal VerifyOnHost's on the same logits up to the round-off stated
// in kernels/cuda/sampling.h and kernels/cuda/verify.h.
// Used by the target engine of a one-rank target on a CUDA device
// (target_worker/device_rows.h, TargetEngine::UseDeviceRows). Written without a
// GPU: tests/gpu/cuda_verifier_test.cc and device_verify_engine_test.cc run it.
// Thread-compatible: one call at a time.
#ifndef SPLITSPEC_RUNTIME_SPEC_CUDA_VERIFIER_H_
#define SPLITSPEC_RUNTIME_SPEC_CUDA_VERIFIER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/spec/device_verify_plan.h"

namespace splitspec::spec {

class CudaVerifier {
 public:
  // Bytes of the last call's two copies.
  struct Transfer {
    size_t up_bytes = 0;
    size_t down_bytes = 0;
  };

  // FailedPrecondition naming the device if it does not exist.
  static absl::StatusOr<std::unique_ptr<CudaVerifier>> Create(int device);
  ~CudaVerifier();
  CudaVerifier(const CudaVerifier&) = delete;
  CudaVerifier& operator=(const CudaVerifier&) = delete;

  // d_logits: device [num_logit_rows, row_stride] floats on this verifier's
  // device, written by work already ordered on `stream`. Returns when the
  // outcomes are on the host. Errors of the whole call: those of PlanDeviceVerify,
  // row_stride < vocab (InvalidArgument), a failed allocation, copy or launch
  // (Internal / ResourceExhausted); request errors go to their outcome.
  absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> Verify(
      absl::Span<const DeviceVerifyRequest> requests, const float* d_logits, int64_t num_logit_rows,
      int64_t row_stride, int32_t vocab, cudaStream_t stream);

  Transfer last_transfer() const { return last_transfer_; }
  // The last call's probability rows, [rows, vocab] on the device, for tests.
  const float* device_probs() const { return probs_; }

 private:
  explicit CudaVerifier(int device) : device_(device) {}
  absl::Status Reserve(size_t inputs, size_t probs_floats, size_t outputs, cudaStream_t stream);

  int device_;
  unsigned char* inputs_ = nullptr;  // the packed upload
  size_t inputs_capacity_ = 0;
  float* probs_ = nullptr;  // target rows, then the residual scratch
  size_t probs_capacity_ = 0;
  unsigned char* outputs_ = nullptr;  // the packed download
  size_t outputs_capacity_ = 0;
  std::vector<unsigned char> staging_;
  Transfer last_transfer_;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_CUDA_VERIFIER_H_
