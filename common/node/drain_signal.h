// Termination signals for node binaries: SIGTERM starts a drain, a second
// SIGTERM or SIGINT ends it early. Signals are blocked in every thread and
// taken synchronously with sigtimedwait, so no handler runs in signal context.
// Thread rule: BlockTerminationSignals in main before any thread starts;
// WaitForTerminationSignal from the main thread.
#pragma once

#include <functional>

namespace tandem::node {

void BlockTerminationSignals();
// The signal number taken (SIGTERM/SIGINT), or 0 after timeout_ms.
int WaitForTerminationSignal(int timeout_ms);

// main's loop: waits for SIGTERM/SIGINT or for draining() (a drain the router
// asked for), calls begin_drain, then waits until idle() or drain_timeout_ms
// passed, or a signal that is not the one that began the drain came. Returns 0.
// `draining` may be empty (signals only).
int RunUntilDrained(const std::function<void()>& begin_drain, const std::function<bool()>& idle, int drain_timeout_ms,
                    const std::function<bool()>& draining = {});

}  // namespace tandem::node
