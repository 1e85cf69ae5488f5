// Run copies: one launch moves many (src, dst, bytes) runs of device memory, the
// way the GPU KV transports move a layer's coalesced block runs: one
// cudaMemcpyAsync per 64 KiB block costs more in copy-engine setup than the bytes
// take, so short runs are gathered into one launch whose thread blocks copy
// 32 KiB tiles with 16-byte loads and stores. Destinations may be another
// process's memory mapped through CUDA IPC, or a peer GPU's (stores cross NVLink).
// Thread rule: the launcher only queues work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

// Runs one launch takes: the run list travels in the kernel parameters (< 32 KB).
inline constexpr int kRunCopyMaxRuns = 1024;

struct RunCopyParams {
  int count = 0;  // runs in use, [0, kRunCopyMaxRuns]
  const std::byte* src[kRunCopyMaxRuns];
  std::byte* dst[kRunCopyMaxRuns];
  int64_t bytes[kRunCopyMaxRuns];  // >= 0; a run of 0 bytes is skipped
};

// Queues the copy of every run. Any alignment works; runs whose source and
// destination share their alignment modulo 16 take the vector path. Runs must
// not conflict (no destination byte written twice, no run reading another's
// destination): tiles run in parallel. Errors: InvalidArgument on a count out of
// range, a null pointer of a non-empty run or a negative length; Internal on launch.
Status LaunchRunCopy(const RunCopyParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
