// Mutex and CondVar for splitspec: std::mutex underneath, Abseil's
// thread-safety annotations on top.
//
//   Mutex mu_;
//   std::deque<Frame> frames_ ABSL_GUARDED_BY(mu_);
//   ...
//   MutexLock lock(&mu_);
//   frames_.push_back(frame);
//   cv_.NotifyOne();
//
// Why not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer, so
// absl::Mutex's synchronization is invisible to TSan and every structure it
// protects reads as racy. std::mutex goes through pthread, which TSan
// intercepts, so the "tsan" preset reports only real races.
#ifndef SPLITSPEC_RUNTIME_BASE_MUTEX_H_
#define SPLITSPEC_RUNTIME_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

namespace splitspec {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

class CondVar {
 public:
  // REQUIRES: `mu` is held by the caller. Spurious wakeups happen: loop on a predicate.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // Returns false if `timeout` passed (the predicate may still have become true).
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified =
        cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout)) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_MUTEX_H_
