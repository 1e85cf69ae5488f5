#include "bench/model/kernel_timeline.h"

#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#ifdef TANDEM_HAVE_CUPTI
#include <cupti.h>
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUPTI
// "tandem::kernels::(anonymous namespace)::Foo<1, float>(Params)" -> "Foo<1, float>".
std::string ShortName(const char* mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string s = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {  // drop the parameter list
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0 && s.compare(i, 20, "(anonymous namespace") != 0) {
      s.resize(i);
      break;
    }
  }
  for (const char* drop : {"(anonymous namespace)::", "tandem::kernels::", "detail::", "void "}) {
    for (size_t at; (at = s.find(drop)) != std::string::npos;) s.erase(at, std::char_traits<char>::length(drop));
  }
  return s;
}

std::mutex g_mu;
std::vector<KernelRecord>* g_records = new std::vector<KernelRecord>;  // never freed: CUPTI may call late

constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::vector<KernelRecord> got;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    got.push_back({ShortName(k->name), k->start, k->end, k->gridX * k->gridY * k->gridZ, k->registersPerThread,
                   k->staticSharedMemory + k->dynamicSharedMemory, static_cast<int>(k->sharedMemoryExecuted)});
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mu);
  g_records->insert(g_records->end(), got.begin(), got.end());
}

Status Cupti(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return Status::Ok();
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  return InternalError(std::string(what) + ": " + (msg != nullptr ? msg : "unknown CUPTI error"));
}
#endif

}  // namespace

Status EnableKernelTimeline() {
#ifdef TANDEM_HAVE_CUPTI
  TANDEM_RETURN_IF_ERROR(Cupti(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted), "CUPTI callbacks"));
  return Cupti(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "CUPTI kernel activity");
#else
  return UnavailableError("built without CUPTI");
#endif
}

StatusOr<std::vector<KernelRecord>> TakeKernelRecords() {
#ifdef TANDEM_HAVE_CUPTI
  if (cudaDeviceSynchronize() != cudaSuccess) return InternalError("cudaDeviceSynchronize failed");
  TANDEM_RETURN_IF_ERROR(Cupti(cuptiActivityFlushAll(1), "CUPTI flush"));
  std::vector<KernelRecord> out;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    out.swap(*g_records);
  }
  std::sort(out.begin(), out.end(), [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  return out;
#else
  return UnavailableError("built without CUPTI");
#endif
}

}  // namespace tandem::bench
