#include "common/base/cpu_time.h"

#include <gtest/gtest.h>

#include <thread>

namespace tandem {
namespace {

TEST(CpuTime, ThreadIdsDiffer) {
  const int mine = ThisThreadId();
  int other = 0;
  std::thread([&] { other = ThisThreadId(); }).join();
  EXPECT_GT(mine, 0);
  EXPECT_GT(other, 0);
  EXPECT_NE(mine, other);
}

TEST(CpuTime, RunQueueWaitOfALiveThreadNeverFalls) {
  const double first = ThreadRunQueueWaitSeconds(ThisThreadId());
  ASSERT_GE(first, 0) << "the kernel gives /proc/self/task/<tid>/schedstat";
  // Busy for a while, yielding: each yield may wait for the core behind others.
  const double until = ThisThreadCpuSeconds() + 0.02;
  while (ThisThreadCpuSeconds() < until) std::this_thread::yield();
  EXPECT_GE(ThreadRunQueueWaitSeconds(ThisThreadId()), first);
}

TEST(CpuTime, RunQueueWaitOfNoThreadIsUnknown) {
  EXPECT_EQ(ThreadRunQueueWaitSeconds(0), -1);
  EXPECT_EQ(ThreadRunQueueWaitSeconds(-3), -1);
  int gone = 0;
  std::thread([&] { gone = ThisThreadId(); }).join();
  // An exited thread's id is free again; it may be reused, but not by a thread of ours now.
  EXPECT_EQ(ThreadRunQueueWaitSeconds(gone), -1);
}

}  // namespace
}  // namespace tandem
