// Runs `promtool check metrics` (Debian package `prometheus`) over the full
// standard set, with observations in every family. Skipped when promtool is
// not installed (tools/setup.sh installs it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/metrics/metric_names.h"
#include "common/metrics/serving_metrics.h"

namespace tandem::metrics {
namespace {

bool HavePromtool() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

// Exit status of promtool over `text`; its output goes to the test log.
int PromtoolCheck(const std::string& text) {
  std::filesystem::path file = std::filesystem::temp_directory_path() /
                               ("tandem_metrics_" + std::to_string(getpid()) + ".prom");
  std::ofstream(file) << text;
  int rc = std::system(("promtool check metrics < " + file.string()).c_str());
  std::filesystem::remove(file);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(PromtoolTest, StandardServingMetricsPassPromtool) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  MetricsRegistry registry;
  ServingMetrics m = ServingMetrics::Register(registry);
  m.time_to_first_token->Get().Observe(0.2);
  m.inter_token_latency->Get().Observe(0.03);
  m.request_queue_time->WithLabels({"prefill"}).Observe(0.01);
  m.kv_transfer_bytes->WithLabels({"sent"}).Increment(4096);
  m.kv_cache_usage->WithLabels({"gpu"}).Set(0.5);
  m.request_success->WithLabels({"stop"}).Increment();
  std::string text = registry.RenderText();
  EXPECT_NE(text.find(std::string(kTimeToFirstTokenSeconds) + "_bucket{le=\"0.25\"} 1"), std::string::npos);
  EXPECT_EQ(PromtoolCheck(text), 0) << text;
}

TEST(PromtoolTest, PromtoolCatchesABrokenExposition) {
  // Proves the check above can fail: a counter without _total and a colon name.
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  MetricsRegistry registry;
  registry.AddCounter("tandem:requests", "Requests.").Get().Increment();
  EXPECT_NE(PromtoolCheck(registry.RenderText()), 0);
}

}  // namespace
}  // namespace tandem::metrics
