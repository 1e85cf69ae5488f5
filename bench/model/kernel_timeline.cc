#include "bench/model/kernel_timeline.h"

#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

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
  std::sort(out.begin(), out.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  return out;
#else
  return UnavailableError("built without CUPTI");
#endif
}

Status PrintReplayTimeline(const std::function<Status()>& relaunch, const std::string& what) {
  constexpr int kReplays = 5;
  for (int i = 0; i < 2; ++i) TANDEM_RETURN_IF_ERROR(relaunch());
  TANDEM_RETURN_IF_ERROR(TakeKernelRecords().status());
  for (int i = 0; i < kReplays; ++i) TANDEM_RETURN_IF_ERROR(relaunch());
  TANDEM_ASSIGN_OR_RETURN(const std::vector<KernelRecord> all, TakeKernelRecords());
  if (all.size() % kReplays != 0 || all.size() < 2 * kReplays) {
    std::printf("%s: timeline has %zu kernels, not %d equal replays\n", what.c_str(), all.size(), kReplays);
    return Status::Ok();
  }
  const size_t per = all.size() / kReplays, first = 2 * per;
  // Each kernel of the middle replay: path, duration and head start in us.
  struct Timing {
    const KernelRecord* k;
    double path, dur, early;
  };
  std::vector<Timing> step;
  uint64_t prev_end = all[first - 1].end_ns;
  for (size_t i = first; i < first + per; ++i) {
    const KernelRecord& k = all[i];
    const double prev = static_cast<double>(prev_end);
    step.push_back({&k, (static_cast<double>(k.end_ns) - prev) / 1e3, (k.end_ns - k.start_ns) / 1e3,
                    (prev - static_cast<double>(k.start_ns)) / 1e3});
    prev_end = std::max(prev_end, k.end_ns);
  }
  struct Agg {
    int count = 0;
    double path = 0, dur = 0, early = 0;
    const KernelRecord* k = nullptr;
  };
  std::map<std::string, Agg> agg;
  for (const Timing& t : step) {
    Agg& a = agg[t.k->name + " x" + std::to_string(t.k->grid)];
    ++a.count;
    a.path += t.path;
    a.dur += t.dur;
    a.early += t.early;
    a.k = t.k;
  }
  std::printf("\ntimeline %s: %zu kernels, %.3f ms (end of the previous replay to the end of this one)\n", what.c_str(),
              per, (prev_end - all[first - 1].end_ns) / 1e6);
  std::vector<std::pair<std::string, Agg>> rows(agg.begin(), agg.end());
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.path > y.second.path; });
  std::printf("  %-52s %5s %9s %8s %8s %8s %5s %7s %7s\n", "kernel x blocks", "n", "path ms", "path us", "dur us",
              "early us", "regs", "smem KB", "cfg KB");
  for (const auto& [name, a] : rows) {
    std::printf("  %-52.52s %5d %9.3f %8.2f %8.2f %8.2f %5d %7.1f %7.1f\n", name.c_str(), a.count, a.path / 1e3,
                a.path / a.count, a.dur / a.count, a.early / a.count, a.k->registers, a.k->shared_bytes / 1024.0,
                a.k->smem_config / 1024.0);
  }
  std::printf("  first kernels (path / dur / early, us):");
  for (size_t i = 0; i < std::min<size_t>(step.size(), 14); ++i) {
    const Timing& t = step[i];
    std::printf("%s %s x%d %.1f/%.1f/%.1f", i % 3 == 0 ? "\n   " : " |", t.k->name.substr(0, 28).c_str(), t.k->grid,
                t.path, t.dur, t.early);
  }
  std::printf("\n");
  return Status::Ok();
}

}  // namespace tandem::bench
