#include "coordinator/http/job_pool.h"

namespace splitspec::coordinator::http {

JobPool::JobPool(int threads, int max_queued) : max_queued_(static_cast<size_t>(max_queued)) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

JobPool::~JobPool() { Stop(); }

bool JobPool::TrySubmit(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    if (stopping_ || jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.NotifyOne();
  return true;
}

void JobPool::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.NotifyAll();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void JobPool::Run() {
  while (true) {
    std::function<void()> job;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && jobs_.empty()) wake_.Wait(&mu_);
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace splitspec::coordinator::http
