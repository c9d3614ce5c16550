// Scalar row primitives for choosing a token from a distribution: the
// references that the CPU and CUDA verification kernels and the runtime's
// samplers are built on.
//
//   const int token = SampleFromWeights(probs, vocab, UniformDouble(seed, pos,
//   RandomPurpose::kSample)); const int greedy = ArgmaxProbs(probs, vocab); const int coupled =
//   GumbelArgmax(probs, vocab, seed, pos);
//
// Rows are unnormalized non-negative weights [n]. Every function validates the
// entries it reads and returns -1 when the row has a negative or non-finite
// entry or no mass at all, so callers turn that into an error naming the row.
// A token with zero weight is never returned. Pure functions; thread-safe.
#ifndef SPLITSPEC_KERNELS_CPU_SAMPLING_H_
#define SPLITSPEC_KERNELS_CPU_SAMPLING_H_

#include <cmath>
#include <cstdint>

#include "kernels/cpu/sampling_philox.h"

namespace splitspec::kernels {

// True for a usable probability or weight: finite and >= 0.
SPLITSPEC_HOST_DEVICE bool IsValidWeight(float w) { return w >= 0.0f && w <= 3.402823466e38f; }

// Index of the largest weight (the lowest index among ties). REQUIRES n >= 1.
// weights: [n]. Returns -1 if an entry is invalid or all are zero.
int ArgmaxProbs(const float* weights, int n);

// Inverse-CDF sampling: with total = sum of weights (in double, index order),
// returns the first index v with weight > 0 whose running sum exceeds u * total;
// if round-off leaves no such index, the last index with weight > 0.
// REQUIRES n >= 1, 0 < u < 1. weights: [n]. Returns -1 if an entry is invalid
// or the total is zero.
int SampleFromWeights(const float* weights, int n, double u);

// Gumbel-max: argmax over v with p_v > 0 of log(p_v) + GumbelNoise(seed, position, v)
// (in double; lowest index among ties). With p normalized this returns v with
// probability exactly p_v; with the same (seed, position) every caller sees the
// same noise. REQUIRES n >= 1. probs: [n]. Returns -1 if an entry is invalid or all are zero.
int GumbelArgmax(const float* probs, int n, uint64_t seed, int64_t position);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_SAMPLING_H_
