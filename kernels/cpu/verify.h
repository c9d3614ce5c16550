// Speculative verification kernel, scalar reference: decides, for every draft
// block of a batch, how many draft tokens to accept and which token to commit
// after them. Knows nothing about requests; runtime/spec/verify.h is the
// request-level front door and states the math.
//
//   VerifyBatchView view = ...;   // host pointers, layout in kernels/cpu/verify_types.h
//   VerifyBatchReference(view);   // fills view.out_*
//
// Per sequence s with k = k_s draft tokens x_0..x_{k-1}, rows p_0..p_k and
// start position t (all randomness from Philox keyed by seeds[s]):
//   greedy:    accept x_i iff x_i == ArgmaxProbs(p_i); else commit that argmax.
//   coupled:   accept x_i iff x_i == GumbelArgmax(p_i, seed, t + i); else commit it.
//   rejection: accept x_i iff u < p_i(x_i) / q_i(x_i), u = UniformDouble(seed, t + i,
//              kAcceptTest); on the first rejection commit SampleFromWeights(
//              max(0, p_i - q_i) computed in float, UniformDouble(seed, t + i, kResidual)),
//              or, when that residual has no mass (p == q up to round-off), sample p_i
//              with the same uniform.
//   all modes: on full acceptance with want_bonus, commit the mode's choice from p_k at
//              position t + k (rejection: SampleFromWeights(p_k, UniformDouble(.., kSample))).
// Under classifier-free guidance the rows p_i are the guided distributions (built by
// kernels/cpu/guidance.h and the sampling transforms) and q is the draft's plain one;
// nothing here relates p to q, so the residual max(0, p_i - q_i) is taken against the
// guided p and the result stays exactly guided decoding (runtime/spec/verify.h).
// p(x_i) == 0 always rejects; q_i(x_i) == 0 is an error (kVerifyTokenHasZeroQ).
// Rows are validated where they are read (see VerifyErrorCode).
//
// REQUIRES: every pointer the batch needs is valid for the sizes in
// verify_types.h; q ids unique per row (runtime/spec checks this).
// Thread-compatible: distinct views may run concurrently.
#ifndef SPLITSPEC_KERNELS_CPU_VERIFY_H_
#define SPLITSPEC_KERNELS_CPU_VERIFY_H_

#include "kernels/cpu/verify_types.h"

namespace splitspec::kernels {

// Verifies every sequence of `view`; a sequence's error never affects another.
void VerifyBatchReference(const VerifyBatchView& view);

// The rejection rule's residual for a sparse q: residual [vocab] = max(0, p - q)
// in float, unnormalized (p [vocab]; q = ids/probs [q_size], ids unique). The one
// computation of it on the CPU: this kernel's and runtime/spec/tree_verify.h's.
// Returns kVerifyOk, kVerifyBadTargetRow if a p entry is negative or non-finite
// (checked first), or kVerifyBadDraftQ if a q entry is, or an id is outside
// [0, vocab). residual must not alias p.
int32_t SparseRejectionResidual(const float* p, int32_t vocab, const int32_t* q_ids,
                                const float* q_probs, int32_t q_size, float* residual);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_VERIFY_H_
