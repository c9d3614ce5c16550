// Classifier-free guidance: the guided logits of a row from the logits the target
// produced for the conditional sequence (the prompt) and for its unconditional
// companion (the negative prompt, or BOS), with a per-row guidance scale s:
//
//   l_g[v] = l_u[v] + s * (l_c[v] - l_u[v])      (s = 1: l_c; s = 0: l_u)
//
//   GuidedLogitsRows(cond, uncond, scales, guided, rows, vocab);   // best path for this CPU
//   // then the usual temperature / top-k / top-p / min-p (runtime/spec/sampling.h)
//
// Exact contract, shared bit for bit by the scalar reference, the AVX2 path and the
// CUDA twin (kernels/cuda/guidance.h):
//   - s == 1: the row is copied from cond unchanged (so an unguided request and a
//     request with scale 1 see bitwise the same logits);
//   - otherwise, per entry: if l_c or l_u is -inf (a masked token) the result is -inf;
//     else fmaf(s, l_c - l_u, l_u): the difference rounded to float, then one fused
//     multiply-add. Every path uses that same fused operation, never a separate
//     multiply and add, which is what makes them agree bitwise.
//   - NaN inputs give NaN, and finite inputs may overflow to +-inf; the sampling
//     transforms refuse such rows, naming the token.
// `out` may alias `cond` or `uncond` (each entry is read before it is written), so
// the caller needs no extra vocabulary-sized buffer. REQUIRES rows >= 0, cols >= 1,
// cond/uncond/out hold rows * cols floats, scales holds rows floats.
// Pure functions; thread-safe on disjoint outputs.
#ifndef SPLITSPEC_KERNELS_CPU_GUIDANCE_H_
#define SPLITSPEC_KERNELS_CPU_GUIDANCE_H_

namespace splitspec::kernels {

// cond, uncond, out: [rows, cols]; scales: [rows].
void GuidedLogitsRows(const float* cond, const float* uncond, const float* scales, float* out,
                      int rows, int cols);

// Scalar reference with the same contract.
void GuidedLogitsRowsReference(const float* cond, const float* uncond, const float* scales,
                               float* out, int rows, int cols);

namespace internal {
void GuidedLogitsRowsAvx2(const float* cond, const float* uncond, const float* scales, float* out,
                          int rows, int cols);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_GUIDANCE_H_
