// JobPool: jobs run on the pool's threads; a full queue refuses instead of
// growing; Stop drops what still waits and refuses later jobs.
#include "coordinator/http/job_pool.h"

#include <atomic>

#include "gtest/gtest.h"
#include "runtime/base/mutex.h"

namespace splitspec::coordinator::http {
namespace {

// A one-shot gate a job blocks on, and a signal that the job is running.
class Gate {
 public:
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
    cv_.NotifyAll();
  }
  void WaitOpen() {
    MutexLock lock(&mu_);
    while (!open_) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(JobPoolTest, AFullQueueRefusesAndDrainsInOrder) {
  JobPool pool(/*threads=*/1, /*max_queued=*/1);
  Gate started;
  Gate release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool.TrySubmit([&] {
    started.Open();
    release.WaitOpen();
    ++ran;
  }));
  started.WaitOpen();  // the only thread is busy; the queue is empty
  Gate second_done;
  EXPECT_TRUE(pool.TrySubmit([&] {
    ++ran;
    second_done.Open();
  }));
  EXPECT_FALSE(pool.TrySubmit([&] { ++ran; }));  // one waits already: refused, not queued
  release.Open();
  second_done.WaitOpen();
  EXPECT_EQ(ran.load(), 2);
  pool.Stop();
  EXPECT_FALSE(pool.TrySubmit([&] { ++ran; }));
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace splitspec::coordinator::http
