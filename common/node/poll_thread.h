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

// Whether a node's poll thread may spin (Pace::kSpin) while a handoff is in flight:
// only when the engine computes elsewhere (a GPU). A progress-driven transport (UCX)
// moves bytes only inside Poll; a device-memory one (cuda_ipc) reports a session's
// steps as soon as it is polled — at the busy cadence each of a session's round trips
// waits for the next ~200 us poll at both ends (cuda_ipc on an H100: 1.05 ms a session).
// On the CPU backend the engine shares the host's cores with the poll threads, and
// spinning ones (one at each end of a handoff) take cores from the compute: on a 2-core
// host a 1P1D cluster's prefill ran about 2× slower while both ends spun. Such a node
// polls at the busy cadence (~200 us) instead.
inline bool MaySpin(bool engine_on_host) { return !engine_on_host; }

}  // namespace tandem::node
