// Start and end times of every kernel the GPU runs, from CUPTI's activity API (PDL overlaps
// included; tracing slows an H200 decode step by 1-2 %), for benchmarks that want to see
// where a step's time goes inside a CUDA graph: each kernel's time on the critical path, how
// early it was launched, and what it held on an SM (registers, shared memory configuration).
//
// Thread rule: Enable once, before the first CUDA call that creates a graph the timeline
// should see; Take from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace tandem::bench {

struct KernelRecord {
  std::string name;       // demangled, namespaces and parameter list dropped
  uint64_t start_ns = 0;  // first block started (a PDL launch: may precede the previous end)
  uint64_t end_ns = 0;    // last block ended
  int grid = 0;           // blocks
  int registers = 0;      // per thread
  int shared_bytes = 0;   // static + dynamic per block
  int smem_config = 0;    // the SM's shared memory carveout the driver chose for it (bytes)
};

// Starts recording kernels. Errors: Unavailable without CUPTI; Internal from CUPTI.
Status EnableKernelTimeline();

// Waits for the device, then returns (sorted by start) and forgets what was recorded since
// EnableKernelTimeline or the previous TakeKernelRecords.
StatusOr<std::vector<KernelRecord>> TakeKernelRecords();

// Prints one step's kernels as the GPU ran them: `relaunch` launches the step's graph once;
// it runs 5 times back to back under the timeline and the middle replay is summarized per
// kernel (name and grid): its time on the critical path ("path": from the previous kernel's
// end to its own), its duration, how long before the previous kernel's end it started
// ("early": PDL), what it holds on an SM; then the order of the first kernels. The step's own
// time comes first. REQUIRES: EnableKernelTimeline succeeded.
Status PrintReplayTimeline(const std::function<Status()>& relaunch, const std::string& what);

}  // namespace tandem::bench
