#include "common/metrics/process_metrics.h"

#include <unistd.h>

#include <fstream>

#include "common/base/cpu_time.h"
#include "common/metrics/metric_names.h"

namespace tandem::metrics {

ProcessMetrics::ProcessMetrics(MetricsRegistry& registry)
    : cpu_(&registry.AddCounter(kProcessCpuSeconds, "Total user and system CPU time spent in seconds.").Get()),
      resident_bytes_(&registry.AddGauge(kProcessResidentMemoryBytes, "Resident memory size in bytes.").Get()) {}

void ProcessMetrics::Collect() {
  cpu_->AdvanceTo(ProcessCpuSeconds());
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  if (statm >> pages >> resident) resident_bytes_->Set(static_cast<double>(resident) * sysconf(_SC_PAGESIZE));
}

}  // namespace tandem::metrics
