#include "common/node/drain_signal.h"

#include <signal.h>
#include <time.h>

#include <chrono>

#include "common/base/logging.h"

namespace tandem::node {

namespace {
sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal(int timeout_ms) {
  sigset_t set = TerminationSet();
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

int RunUntilDrained(const std::function<void()>& begin_drain, const std::function<bool()>& idle, int drain_timeout_ms,
                    const std::function<bool()>& draining) {
  int sig = 0;
  while ((sig = WaitForTerminationSignal(100)) == 0) {
    if (draining && draining()) break;
  }
  if (sig != 0) {
    TANDEM_LOG_INFO("signal {}: draining (deadline {} ms)", sig, drain_timeout_ms);
  } else {
    TANDEM_LOG_INFO("drain asked by the router (deadline {} ms)", drain_timeout_ms);
  }
  begin_drain();
  // The signal that began the drain ends it early when it comes again; after a drain
  // the router asked for, the first signal (systemctl stop) only waits for it.
  int signals = sig != 0 ? 1 : 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_timeout_ms);
  while (!idle() && std::chrono::steady_clock::now() < deadline) {
    if (WaitForTerminationSignal(50) == 0) continue;
    if (++signals >= 2) {
      TANDEM_LOG_WARN("second signal: ending the drain now");
      break;
    }
    TANDEM_LOG_INFO("signal during the drain: still draining (a second one ends it now)");
  }
  TANDEM_LOG_INFO("drain done ({})", idle() ? "idle" : "deadline or signal");
  return 0;
}

}  // namespace tandem::node
