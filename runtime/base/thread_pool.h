// A fixed set of worker threads that run data-parallel loops (matmul row
// ranges, attention heads) together with the calling thread.
//
//   ThreadPool pool(ThreadPool::DefaultThreads());   // hardware_concurrency
//   pool.ParallelFor(num_chunks, [&](int64_t chunk, int thread) {
//     MatMulRows(type, w, cols, packed, chunk * 64, std::min(rows, chunk * 64 + 64), y, rows);
//   });
//
// Thread model: `num_threads - 1` workers plus the caller of ParallelFor, which
// takes tasks too. Tasks are handed out one at a time from a shared counter, so
// which thread runs which task varies from call to call: a task must not depend
// on the thread that runs it except through `thread` (an index in
// [0, num_threads) that is unique among the threads running concurrently, meant
// for per-thread scratch buffers).
//
// Idle policy: after a loop a worker polls for the next loop for a short bounded
// time (about 50 microseconds, so back-to-back loops of a decode step do not pay
// a wake-up each) and then sleeps on a condition variable; an idle pool uses no
// CPU. The destructor wakes and joins the workers.
//
// ParallelFor returns as soon as every task has run: it never waits for a worker
// that has not woken up yet (on an oversubscribed machine the caller simply runs
// more of the tasks itself).
//
// Thread safety: ParallelFor may be called from one thread at a time (calls are
// serialized by an internal mutex); `fn` must not call ParallelFor on the same
// pool.
#ifndef SPLITSPEC_RUNTIME_BASE_THREAD_POOL_H_
#define SPLITSPEC_RUNTIME_BASE_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "runtime/base/mutex.h"

namespace splitspec {

class ThreadPool {
 public:
  // std::thread::hardware_concurrency(), at least 1.
  static int DefaultThreads();

  // REQUIRES: num_threads >= 1 (values < 1 are treated as 1).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(task, thread) for every task in [0, num_tasks) and returns when all
  // have finished. num_tasks <= 0 returns at once. fn must not throw.
  void ParallelFor(int64_t num_tasks, absl::FunctionRef<void(int64_t task, int thread)> fn);

 private:
  // Task claims are packed as (generation << kTaskBits) | next task index, so a
  // worker that wakes late, after its loop finished and a new one began, fails
  // the generation check instead of running a task of the wrong loop.
  static constexpr int kTaskBits = 40;

  void WorkerMain(int thread);
  // Claims and runs tasks of loop `generation` until none are left.
  void Drain(uint64_t generation, int thread);

  const int num_threads_;
  std::vector<std::thread> workers_;

  Mutex call_mu_;  // serializes ParallelFor callers

  // The loop being run. fn_ and num_tasks_ are written by ParallelFor under mu_
  // before the generation is published in claim_, and read by workers under mu_.
  Mutex mu_;
  CondVar work_cv_;  // signalled when a loop starts or on shutdown
  CondVar done_cv_;  // signalled when the last task of a loop finishes
  const absl::FunctionRef<void(int64_t, int)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Size of the loop: set under mu_ before claim_ is published; read under mu_ by
  // Drain, and without the lock only as a polling hint.
  std::atomic<int64_t> num_tasks_{0};
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> claim_{0};      // (generation << kTaskBits) | next task
  std::atomic<int64_t> tasks_done_{0};  // tasks of the current loop finished
};

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_THREAD_POOL_H_
