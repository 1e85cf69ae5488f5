// Random bf16 data on the device, for benchmarks that need weights or KV without a
// checkpoint. Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/base/status.h"

namespace tandem::bench {

// dst[i] = bf16(center + spread * u), u uniform in [-1, 1) from a counter-based hash of
// (seed, i): the same arguments give the same values.
Status LaunchFillRandomBf16(__nv_bfloat16* dst, size_t count, uint64_t seed, float center, float spread,
                            cudaStream_t stream);

}  // namespace tandem::bench
