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
    MutexLock lock(&mu_);
    shutdown_ = true;
    work_cv_.NotifyAll();
  }
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::Drain(uint64_t generation, int thread) {
  // The loop's function and size, read together under the lock: a claim below only
  // succeeds on the exact value (generation, task) with task < num_tasks of this
  // loop, i.e. on a task of this loop that nobody has claimed yet.
  const absl::FunctionRef<void(int64_t, int)>* fn;
  int64_t num_tasks;
  {
    MutexLock lock(&mu_);
    if (generation_ != generation) return;  // that loop is over
    fn = fn_;
    num_tasks = num_tasks_.load(std::memory_order_relaxed);
  }
  const uint64_t mask = (uint64_t{1} << kTaskBits) - 1;
  uint64_t claim = claim_.load(std::memory_order_acquire);
  for (;;) {
    if ((claim >> kTaskBits) != generation) return;
    const int64_t task = static_cast<int64_t>(claim & mask);
    if (task >= num_tasks) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
    (*fn)(task, thread);
    if (tasks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_tasks) {
      MutexLock lock(&mu_);
      done_cv_.NotifyAll();
    }
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelFor(int64_t num_tasks,
                             absl::FunctionRef<void(int64_t task, int thread)> fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  MutexLock call_lock(&call_mu_);
  uint64_t generation;
  {
    MutexLock lock(&mu_);
    generation = ++generation_ & ((uint64_t{1} << (64 - kTaskBits)) - 1);
    generation_ = generation;
    fn_ = &fn;
    num_tasks_.store(num_tasks, std::memory_order_relaxed);
    tasks_done_.store(0, std::memory_order_relaxed);
    claim_.store(generation << kTaskBits, std::memory_order_release);
    work_cv_.NotifyAll();
  }
  Drain(generation, 0);
  // Tasks claimed by workers may still be running; wait for them only.
  auto all_done = [&] { return tasks_done_.load(std::memory_order_acquire) == num_tasks; };
  if (!PollFor(all_done)) {
    MutexLock lock(&mu_);
    while (!all_done()) done_cv_.Wait(&mu_);
  }
  MutexLock lock(&mu_);
  fn_ = nullptr;
}

void ThreadPool::WorkerMain(int thread) {
  uint64_t seen = 0;
  for (;;) {
    const uint64_t mask = (uint64_t{1} << kTaskBits) - 1;
    PollFor([&] {
      const uint64_t claim = claim_.load(std::memory_order_acquire);
      return (claim >> kTaskBits) != seen &&
             static_cast<int64_t>(claim & mask) < num_tasks_.load(std::memory_order_relaxed);
    });
    uint64_t generation;
    {
      MutexLock lock(&mu_);
      while (!shutdown_ && generation_ == seen) work_cv_.Wait(&mu_);
      if (shutdown_) return;
      generation = generation_;
    }
    seen = generation;
    Drain(generation, thread);
  }
}

}  // namespace splitspec
