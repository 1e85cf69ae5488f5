// PollThread: the owner thread of a node's KV transport objects. It runs the
// closures other threads Post to it, in order, and calls `poll` in between, at
// the cadence `pace` asks for: every 5 ms when idle, every ~200 us while busy
// (completions are reported soon), or back to back while spinning (transports
// whose bytes move only inside Poll, such as UCX, then run at their own speed).
//
// Thread rule: Post is thread-safe; poll, busy and posted closures run on the
// poll thread. Start/Stop from the owning thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem::node {

class PollThread {
 public:
  enum class Pace { kIdle, kBusy, kSpin };

  PollThread() = default;
  ~PollThread();  // Stop()

  // Starts the thread. `poll` drives progress; `pace` (optional; kIdle without it)
  // is asked before each wait.
  void Start(std::function<void()> poll, std::function<Pace()> pace = nullptr);
  // Runs the queued closures, then joins. Idempotent.
  void Stop();
  // Runs `fn` on the poll thread soon. Dropped after Stop.
  void Post(std::function<void()> fn);
  // Posts `fn` and waits for it. REQUIRES: not on the poll thread.
  void RunSync(std::function<void()> fn);

 private:
  void Loop();

  std::function<void()> poll_;
  std::function<Pace()> pace_;
  std::mutex mu_;  // guards queue_, stop_
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tandem::node
