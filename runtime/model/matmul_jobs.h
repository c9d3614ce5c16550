// Several matmuls over the same tokens in one thread-pool dispatch: the matmul
// core of the CPU transformer backend (cpu_backend.h).
//
//   RunMatMulJobs(pool, {{&wq, xn, q}, {&wk, xn, k}, {&wv, xn, v}}, tokens, &packed);
//
// Each job computes y [tokens, w->rows] = x [tokens, w->cols] W^T. Activations
// are packed once per distinct (weight type, x); every job's rows are split into
// chunks (about four per thread, multiples of 16) and all chunks of all jobs run
// in one ParallelFor. Results are bitwise independent of the thread count.
#ifndef SPLITSPEC_RUNTIME_MODEL_MATMUL_JOBS_H_
#define SPLITSPEC_RUNTIME_MODEL_MATMUL_JOBS_H_

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/weights.h"

namespace splitspec::model {

struct MatMulJob {
  const WeightMatrix* w;
  const float* x;  // [tokens, w->cols]
  float* y;        // [tokens, w->rows]
};

inline constexpr int kMaxMatMulJobs = 4;

// A step of at least this many tokens (a prompt chunk) spreads its per-token work between
// the matmuls (activation packing, norms, gating) over the pool's threads; below it a
// second dispatch costs more than the work it splits (measured: matmul_jobs.cc).
inline constexpr int64_t kParallelTokenWork = 16;

// REQUIRES: jobs.size() <= kMaxMatMulJobs (CHECKed); `packed` is scratch reused
// across calls (resized as needed).
void RunMatMulJobs(ThreadPool& pool, std::initializer_list<MatMulJob> jobs, int64_t tokens,
                   std::vector<kernels::PackedActivations>* packed);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_MATMUL_JOBS_H_
