// DescribeDevice: what a profile records about the hardware it ran on — the
// GPU (CUDA builds: name, memory, SMs of the device ordinal) or the host CPU
// (model name, hardware threads, RAM).
// Thread rule: free function.
#pragma once

#include <string>

#include "common/base/status.h"
#include "planner/profile.h"

namespace tandem::tools {

// `backend`: "cpu" or "cuda"; `ordinal`: the CUDA device. Unimplemented for
// "cuda" in a build without CUDA.
StatusOr<planner::DeviceInfo> DescribeDevice(const std::string& backend, int ordinal);

}  // namespace tandem::tools
