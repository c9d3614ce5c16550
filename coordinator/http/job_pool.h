// JobPool: a fixed set of threads running jobs from a bounded queue. The
// front door runs JSON parsing and tokenization here, never on the HTTP I/O
// thread, so one expensive body delays only itself.
//
//   JobPool pool(/*threads=*/4, /*max_queued=*/64);
//   if (!pool.TrySubmit([] { ... })) { answer 503 + Retry-After: the pool is full }
//   pool.Stop();  // or the destructor
//
// TrySubmit never blocks: when max_queued jobs already wait, it refuses (the
// caller sheds load instead of queueing without bound).
//
// Thread safety: TrySubmit and Stop are thread-safe. Stop runs the jobs that
// already started to their end, drops the ones still waiting, and makes later
// TrySubmit calls return false.
#ifndef SPLITSPEC_COORDINATOR_HTTP_JOB_POOL_H_
#define SPLITSPEC_COORDINATOR_HTTP_JOB_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/base/mutex.h"

namespace splitspec::coordinator::http {

class JobPool {
 public:
  // REQUIRES: threads >= 1, max_queued >= 1.
  JobPool(int threads, int max_queued);
  ~JobPool();
  JobPool(const JobPool&) = delete;
  JobPool& operator=(const JobPool&) = delete;

  // Queues `job`; false (and `job` is dropped) when the queue is full or the
  // pool stopped.
  bool TrySubmit(std::function<void()> job);
  void Stop();

 private:
  void Run();

  const size_t max_queued_;
  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar wake_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_JOB_POOL_H_
