#include "common/base/cpu_time.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace tandem {

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double ThisThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int ThisThreadId() { return static_cast<int>(syscall(SYS_gettid)); }

double ThreadRunQueueWaitSeconds(int tid) {
  if (tid <= 0) return -1;
  // "<ns on a core> <ns waiting on a run queue> <time slices>"
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  unsigned long long on_core = 0, waiting = 0;
  const int fields = std::fscanf(f, "%llu %llu", &on_core, &waiting);
  std::fclose(f);
  return fields == 2 ? static_cast<double>(waiting) * 1e-9 : -1;
}

}  // namespace tandem
