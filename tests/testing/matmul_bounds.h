// Hard (not statistical) error bounds for one output of a matmul, shared by the
// CPU kernel tests (tests/unit/kernels/matmul_test.cc) and the CUDA ones
// (tests/gpu/quant_matmul_cuda_test.cc), so that both state the same formula.
//
//   const double bound = QuantizedDotBound(type, w_row, x_row, cols);
//   ASSERT_NEAR(got, exact_dot, bound);   // exact_dot: sum w_row[i] * x_row[i] in double
//
// Each bound scales with the output's own magnitudes (sum |w_i| |x_i| and the
// activation blocks' amax), never with other outputs: a relative error against
// the largest output of a matrix is ill-conditioned for an output near zero
// (one row of 256 columns gave 0.586 for Q4_1 on the first GPU run while the
// kernel was right).
#ifndef SPLITSPEC_TESTS_TESTING_MATMUL_BOUNDS_H_
#define SPLITSPEC_TESTS_TESTING_MATMUL_BOUNDS_H_

#include <cstdint>

#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

// The error of a float sum of `n` terms whose absolute values sum to `mass`, in any
// order: 2 n u mass (u = 2^-24, twice gamma_n for margin).
double SummationBound(int64_t n, double mass);

// Sum over the row of |w_i| * |x_i|, plus over each activation block the bias terms
// the integer paths carry (4 * max|w| * sum |x| per block of a quantized type): a
// bound on every partial sum any kernel path forms for this output.
double PartialSumMass(GgmlType type, const float* w, const float* x, int64_t cols);

// |matmul output - sum_i w_i x_i| for weights `w` (dequantized, one row) and float
// activations `x` when the kernel quantizes the activations as the CPU packer does
// (8-bit, blocks of max(32, the type's block size), a half-precision scale for
// 32-element blocks): each activation moves by at most half its block's step
// amax / 127 (plus the scale's half-precision rounding), so
//   bound = 1.0001 * sum_i |w_i| * (amax_block(i) / 127) * step_error
//           + SummationBound(cols, PartialSumMass(...)).
// Float weight types (block size 1) see float activations: the summation term only.
double QuantizedDotBound(GgmlType type, const float* w, const float* x, int64_t cols);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_TESTS_TESTING_MATMUL_BOUNDS_H_
