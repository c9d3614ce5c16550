// CUDA twin of kernels/cpu/verify.h: speculative verification of a batch of
// draft blocks (ragged k) on device memory.
//
//   VerifyBatchView view = ...;   // device pointers, layout in kernels/cpu/verify_types.h
//   view.scratch = d_scratch;     // [num_sequences, vocab] floats
//   RETURN_IF_ERROR(LaunchVerifyBatch(view, stream));
//
// Same contract, rules and randomness as VerifyBatchReference (one thread block
// per sequence), so its outputs equal the CPU reference token for token, except
// where a sampled uniform falls within a few ulps of a cumulative-sum boundary
// or two Gumbel keys tie within an ulp (sums and logs are rounded differently on
// the device; the chance is ~1e-12 per choice).
// Errors: InvalidArgument for num_sequences < 0, vocab < 1, or a null pointer the
// batch needs (named); Internal if the launch fails. The launch is asynchronous
// on `stream`; nothing is written on error. Per-sequence errors are reported in
// view.out_error exactly as on the CPU.
#ifndef SPLITSPEC_KERNELS_CUDA_VERIFY_H_
#define SPLITSPEC_KERNELS_CUDA_VERIFY_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/cpu/verify_types.h"

namespace splitspec::kernels {

absl::Status LaunchVerifyBatch(const VerifyBatchView& view, cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_VERIFY_H_
