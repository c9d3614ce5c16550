#include "runtime/base/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskExactlyOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 37;
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](int64_t task, int thread) {
      ASSERT_GE(thread, 0);
      ASSERT_LT(thread, 4);
      hits[task].fetch_add(1);
    });
    for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round << " task " << i;
  }
}

// Many tiny back-to-back loops: a worker that wakes late must neither run a task of
// an old loop nor count one twice (either would hang or break the counts).
TEST(ThreadPoolTest, BackToBackLoopsNeverLoseOrRepeatTasks) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  int64_t expected = 0;
  for (int round = 0; round < 20000; ++round) {
    const int n = 2 + round % 5;
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, [&](int64_t task, int) {
      hits[task].fetch_add(1);
      total.fetch_add(task + 1);
    });
    for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round;
    expected += n * (n + 1) / 2;
  }
  EXPECT_EQ(total.load(), expected);
}

TEST(ThreadPoolTest, ThreadIndicesAreExclusive) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> in_use(3);
  std::atomic<bool> overlap{false};
  pool.ParallelFor(3000, [&](int64_t, int thread) {
    if (in_use[thread].fetch_add(1) != 0) overlap = true;
    in_use[thread].fetch_sub(1);
  });
  EXPECT_FALSE(overlap.load());
}

TEST(ThreadPoolTest, SingleThreadAndEmptyLoops) {
  ThreadPool pool(0);  // treated as 1
  EXPECT_EQ(pool.num_threads(), 1);
  int sum = 0;
  pool.ParallelFor(10, [&](int64_t task, int thread) {
    EXPECT_EQ(thread, 0);
    sum += static_cast<int>(task);
  });
  EXPECT_EQ(sum, 45);
  pool.ParallelFor(0, [&](int64_t, int) { sum = -1; });
  EXPECT_EQ(sum, 45);
  EXPECT_GE(ThreadPool::DefaultThreads(), 1);
}

}  // namespace
}  // namespace splitspec
