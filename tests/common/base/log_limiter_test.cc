#include "common/base/log_limiter.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(LogLimiterTest, FirstOccurrenceLogsThenOncePerIntervalWithTheCountHeldBack) {
  FakeClock clock;
  LogLimiter limiter(clock, /*interval_ms=*/1000);
  int64_t suppressed = -1;
  EXPECT_TRUE(limiter.Allow("peer-a|wrong token", &suppressed));
  EXPECT_EQ(suppressed, 0);
  for (int i = 0; i < 5; ++i) {
    clock.AdvanceMs(100);
    EXPECT_FALSE(limiter.Allow("peer-a|wrong token", &suppressed)) << i;
  }
  // Another key is independent.
  EXPECT_TRUE(limiter.Allow("peer-b|wrong token", &suppressed));
  EXPECT_EQ(suppressed, 0);
  clock.AdvanceMs(500);  // 1000 ms after peer-a's first log
  EXPECT_TRUE(limiter.Allow("peer-a|wrong token", &suppressed));
  EXPECT_EQ(suppressed, 5);
  EXPECT_EQ(SuppressedNote(suppressed), " (5 more since the last report)");
  clock.AdvanceMs(999);
  EXPECT_FALSE(limiter.Allow("peer-a|wrong token", &suppressed));
  clock.AdvanceMs(5000);
  EXPECT_TRUE(limiter.Allow("peer-a|wrong token", &suppressed));
  EXPECT_EQ(suppressed, 1);
  EXPECT_EQ(SuppressedNote(0), "");
}

TEST(LogLimiterTest, FullTableForgetsExpiredKeysAndNeverLosesANewOne) {
  FakeClock clock;
  LogLimiter limiter(clock, /*interval_ms=*/1000, /*max_keys=*/2);
  int64_t suppressed = 0;
  EXPECT_TRUE(limiter.Allow("a", &suppressed));
  EXPECT_TRUE(limiter.Allow("b", &suppressed));
  // Full, nothing expired: a new key still logs (untracked), every time.
  EXPECT_TRUE(limiter.Allow("c", &suppressed));
  EXPECT_TRUE(limiter.Allow("c", &suppressed));
  EXPECT_FALSE(limiter.Allow("a", &suppressed));
  // After the interval "a" and "b" are forgotten, so "c" is tracked from now on.
  clock.AdvanceMs(1000);
  EXPECT_TRUE(limiter.Allow("c", &suppressed));
  EXPECT_FALSE(limiter.Allow("c", &suppressed));
  EXPECT_TRUE(limiter.Allow("a", &suppressed));
  EXPECT_EQ(suppressed, 0) << "a's count went with its entry";
}

}  // namespace
}  // namespace tandem
