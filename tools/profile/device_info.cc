#include "tools/profile/device_info.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#ifdef TANDEM_PROFILE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem::tools {
namespace {

// /proc/cpuinfo's first "model name", or "unknown CPU".
std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown CPU" : line.substr(start);
  }
  return "unknown CPU";
}

}  // namespace

StatusOr<planner::DeviceInfo> DescribeDevice(const std::string& backend, int ordinal) {
  planner::DeviceInfo info;
  info.backend = backend;
  if (backend == "cpu") {
    info.name = CpuModelName();
    info.compute_units = static_cast<int>(std::thread::hardware_concurrency());
    info.memory_bytes = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
    return info;
  }
#ifdef TANDEM_PROFILE_CUDA
  cudaDeviceProp props{};
  if (cudaError_t e = cudaGetDeviceProperties(&props, ordinal); e != cudaSuccess) {
    return UnavailableError("CUDA device " + std::to_string(ordinal) + ": " + cudaGetErrorString(e));
  }
  info.ordinal = ordinal;
  info.name = props.name;
  info.memory_bytes = static_cast<int64_t>(props.totalGlobalMem);
  info.compute_units = props.multiProcessorCount;
  return info;
#else
  return UnimplementedError("backend '" + backend + "': this build has no CUDA");
#endif
}

}  // namespace tandem::tools
