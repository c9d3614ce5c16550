#include "runtime/model/matmul_jobs.h"

#include <algorithm>
#include <utility>

#include "runtime/base/logging.h"

namespace splitspec::model {
namespace {

// Rows per matmul task: about four tasks per thread per matrix, a multiple of 16.
int64_t ChunkRows(int64_t rows, int threads) {
  const int64_t target = (rows + 4 * threads - 1) / (4 * threads);
  return std::max<int64_t>(16, (target + 15) / 16 * 16);
}

}  // namespace

void RunMatMulJobs(ThreadPool& pool, std::initializer_list<MatMulJob> jobs, int64_t tokens,
                   std::vector<kernels::PackedActivations>* packed) {
  struct Prepared {
    const WeightMatrix* w;
    const kernels::PackedActivations* packed;
    float* y;
    int64_t chunk_rows;
    int64_t first_task;
  };
  if (packed->size() < static_cast<size_t>(kMaxMatMulJobs)) packed->resize(kMaxMatMulJobs);
  Prepared prepared[kMaxMatMulJobs];
  std::pair<kernels::GgmlType, const float*> pack_keys[kMaxMatMulJobs];
  int num_jobs = 0;
  int num_packs = 0;
  int64_t num_tasks = 0;
  // A batch of many tokens is packed on the pool's threads (its quantization is
  // per token, and on one thread it left the others idle: ~6% of a 96-token prefill;
  // packed in parallel, 66-72 -> 60-65 ms).
  const bool pack_in_parallel = tokens >= kParallelTokenWork && pool.num_threads() > 1;
  for (const MatMulJob& job : jobs) {
    SPLITSPEC_CHECK(num_jobs < kMaxMatMulJobs)
        << "at most " << kMaxMatMulJobs << " matmuls share a dispatch";
    int pack = 0;
    while (pack < num_packs && pack_keys[pack] != std::make_pair(job.w->type, job.x)) ++pack;
    if (pack == num_packs) {
      if (pack_in_parallel) {
        kernels::SizeActivations(job.w->type, tokens, job.w->cols, &(*packed)[pack]);
      } else {
        kernels::PackActivations(job.w->type, job.x, tokens, job.w->cols, &(*packed)[pack]);
      }
      pack_keys[num_packs++] = {job.w->type, job.x};
    }
    const int64_t chunk = ChunkRows(job.w->rows, pool.num_threads());
    prepared[num_jobs++] = {job.w, &(*packed)[pack], job.y, chunk, num_tasks};
    num_tasks += (job.w->rows + chunk - 1) / chunk;
  }
  if (pack_in_parallel) {
    const int64_t parts = 2 * pool.num_threads();
    pool.ParallelFor(num_packs * parts, [&](int64_t task, int) {
      const int pack = static_cast<int>(task / parts);
      const int64_t part = task % parts;
      kernels::PackActivationTokens(pack_keys[pack].second, tokens * part / parts,
                                    tokens * (part + 1) / parts, &(*packed)[pack]);
    });
  }
  pool.ParallelFor(num_tasks, [&](int64_t task, int) {
    int j = num_jobs - 1;
    while (prepared[j].first_task > task) --j;
    const Prepared& p = prepared[j];
    const int64_t row_begin = (task - p.first_task) * p.chunk_rows;
    const int64_t row_end = std::min(p.w->rows, row_begin + p.chunk_rows);
    if (p.w->interleaved != nullptr) {  // chunks start at multiples of 16 rows
      kernels::MatMulRowsInterleaved(p.w->type, p.w->interleaved.get(), p.w->cols, *p.packed,
                                     row_begin, row_end, p.y, p.w->rows);
      return;
    }
    kernels::MatMulRows(p.w->type, p.w->data, p.w->cols, *p.packed, row_begin, row_end, p.y,
                        p.w->rows);
  });
}

}  // namespace splitspec::model
