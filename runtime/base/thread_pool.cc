#include "runtime/base/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace splitspec {
namespace {

// How long a thread polls for the next event before blocking on a condition variable.
constexpr std::chrono::microseconds kPollWindow(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `done` for up to kPollWindow; true if it became true in that time.
template <typename Predicate>
bool PollFor(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + kPollWindow;
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace

int ThreadPool::DefaultThreads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { WorkerMain(t); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    work_cv_.SignalAll();
  }
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::Drain(Job& job, int thread) {
  for (;;) {
    const int64_t task = job.next.fetch_add(1, std::memory_order_relaxed);
    if (task >= job.num_tasks) return;
    job.fn(task, thread);
  }
}

void ThreadPool::ParallelFor(int64_t num_tasks,
                             absl::FunctionRef<void(int64_t task, int thread)> fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  absl::MutexLock call_lock(&call_mu_);
  Job job{fn, num_tasks};
  {
    absl::MutexLock lock(&mu_);
    job_ = &job;
    workers_busy_.store(num_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    work_cv_.SignalAll();
  }
  Drain(job, 0);
  // Every worker takes part in every job (it decrements workers_busy_ once), so
  // `job` on this stack stays referenced until workers_busy_ reaches zero.
  if (!PollFor([this] { return workers_busy_.load(std::memory_order_acquire) == 0; })) {
    absl::MutexLock lock(&mu_);
    while (workers_busy_.load(std::memory_order_acquire) != 0) done_cv_.Wait(&mu_);
  }
  absl::MutexLock lock(&mu_);
  job_ = nullptr;
}

void ThreadPool::WorkerMain(int thread) {
  uint64_t seen = 0;
  for (;;) {
    PollFor([&] { return generation_.load(std::memory_order_acquire) != seen; });
    Job* job = nullptr;
    {
      absl::MutexLock lock(&mu_);
      while (!shutdown_ && generation_.load(std::memory_order_acquire) == seen) {
        work_cv_.Wait(&mu_);
      }
      if (shutdown_) return;
      seen = generation_.load(std::memory_order_acquire);
      job = job_;
    }
    Drain(*job, thread);
    if (workers_busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      absl::MutexLock lock(&mu_);
      done_cv_.SignalAll();
    }
  }
}

}  // namespace splitspec
