// ProcessMetrics: the process's own CPU time and memory, under the names the
// Prometheus client libraries' process collectors use (process_cpu_seconds_total,
// process_resident_memory_bytes), so an operator's dashboards and a capacity
// planner see what every tandem process costs its host. Collect() reads them
// from the kernel (getrusage, /proc/self/statm); call it before rendering.
//
// Thread rule: thread-safe.
#pragma once

#include "common/metrics/metrics_registry.h"

namespace tandem::metrics {

class ProcessMetrics {
 public:
  explicit ProcessMetrics(MetricsRegistry& registry);
  void Collect();

 private:
  Counter* cpu_ = nullptr;
  Gauge* resident_bytes_ = nullptr;
};

}  // namespace tandem::metrics
