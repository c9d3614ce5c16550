// Row-wise softmax: probs[r, :] = exp(logits[r, :] - max) / sum.
//
//   SoftmaxRows(logits, probs, rows, vocab);   // picks the best path for this CPU
//   SoftmaxRowsReference(logits, probs, rows, vocab);  // the scalar reference
//
// Each row is reduced in a fixed order that depends only on `cols`, so a row's
// result is bitwise identical whatever `rows` is (batch invariance).
// REQUIRES: rows >= 0, cols >= 1, logits and probs each hold rows * cols floats
// (they may alias). Rows containing NaN produce NaN. -inf entries get probability 0;
// a row that is all -inf is undefined (callers mask at least one entry).
#ifndef SPLITSPEC_KERNELS_CPU_SOFTMAX_H_
#define SPLITSPEC_KERNELS_CPU_SOFTMAX_H_

namespace splitspec::kernels {

// logits: [rows, cols] (input), probs: [rows, cols] (output).
void SoftmaxRows(const float* logits, float* probs, int rows, int cols);

// Scalar reference with the same contract.
void SoftmaxRowsReference(const float* logits, float* probs, int rows, int cols);

namespace internal {
void SoftmaxRowsAvx2(const float* logits, float* probs, int rows, int cols);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_SOFTMAX_H_
