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
