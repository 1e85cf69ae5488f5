// Clocks. Code that needs time takes a `Clock&` so tests can drive a FakeClock.
// SystemClock is thread-safe; FakeClock is thread-safe (atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tandem {

using Nanos = int64_t;  // nanoseconds since an arbitrary monotonic epoch

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds.
  virtual Nanos NowNanos() const = 0;
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
  // The process-wide real clock.
  static Clock& Real();
};

class SystemClock final : public Clock {
 public:
  Nanos NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(Nanos start = 0) : now_(start) {}
  Nanos NowNanos() const override { return now_.load(); }
  void Advance(Nanos delta) { now_ += delta; }
  void AdvanceMs(int64_t ms) { Advance(ms * 1'000'000); }

 private:
  std::atomic<Nanos> now_;
};

constexpr Nanos MsToNanos(int64_t ms) { return ms * 1'000'000; }

}  // namespace tandem
