// CPU time (user + system) spent so far, in seconds: by this process, or by the
// calling thread. Thread-safe.
#pragma once

namespace tandem {

double ProcessCpuSeconds();
double ThisThreadCpuSeconds();

}  // namespace tandem
