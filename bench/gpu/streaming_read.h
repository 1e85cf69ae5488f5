// A streaming-read kernel: reads a buffer once with 16-byte loads and folds it into a
// few words, giving the HBM read ceiling that benchmarks compare against.
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/base/status.h"

namespace tandem::bench {

// Reads `bytes` (a multiple of 16) from `src`; writes one 16-byte word per thread block
// into `sink` (at least 4096 * 16 bytes). Errors: InvalidArgument; Internal on launch.
Status LaunchStreamingRead(const void* src, size_t bytes, void* sink, cudaStream_t stream);

}  // namespace tandem::bench
