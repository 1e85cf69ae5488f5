// CPU time (user + system) spent so far, in seconds: by this process, or by the
// calling thread. Thread-safe.
#pragma once

namespace tandem {

double ProcessCpuSeconds();
double ThisThreadCpuSeconds();

// The calling thread's id (gettid), for ThreadRunQueueWaitSeconds from another thread.
int ThisThreadId();
// How long thread `tid` of this process has been runnable but waiting for a core, in
// seconds (the kernel's /proc/self/task/<tid>/schedstat); -1 when the kernel does not
// say (no such thread, no schedstat).
double ThreadRunQueueWaitSeconds(int tid);

}  // namespace tandem
