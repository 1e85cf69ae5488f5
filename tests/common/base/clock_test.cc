#include "common/base/clock.h"

#include <gtest/gtest.h>

#include "common/base/ids.h"

namespace tandem {
namespace {

TEST(ClockTest, FakeClockAdvances) {
  FakeClock clock(5);
  EXPECT_EQ(clock.NowNanos(), 5);
  clock.AdvanceMs(2);
  EXPECT_EQ(clock.NowNanos(), 5 + 2'000'000);
}

TEST(ClockTest, RealClockIsMonotonic) {
  Nanos a = Clock::Real().NowNanos();
  Nanos b = Clock::Real().NowNanos();
  EXPECT_LE(a, b);
}

TEST(IdsTest, RandomHexIdsAreDistinctHex) {
  std::string a = RandomHexId(), b = RandomHexId();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace tandem
