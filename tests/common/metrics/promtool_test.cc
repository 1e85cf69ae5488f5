// Runs `promtool check metrics` (Debian package `prometheus`) over the full
// standard set, with observations in every family. Skipped when promtool is
// not installed (tools/setup.sh installs it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/metrics/metric_names.h"
#include "common/metrics/metrics_registry.h"

namespace tandem::metrics {
namespace {

bool HavePromtool() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

// Exit status of promtool over `text`; its output goes to the test log.
int PromtoolCheck(const std::string& text) {
  std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("tandem_metrics_" + std::to_string(getpid()) + ".prom");
  std::ofstream(file) << text;
  int rc = std::system(("promtool check metrics < " + file.string()).c_str());
  std::filesystem::remove(file);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(PromtoolTest, EveryKindOfServingFamilyPassesPromtool) {
  // The shapes the router and nodes export (the e2e metrics test runs promtool
  // on their real pages): labelled histograms of seconds and of tokens, a
  // labelled counter, an info gauge.
  if (!HavePromtool()) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  MetricsRegistry registry;
  registry.AddHistogram(kTimeToFirstTokenSeconds, "TTFT.", TimeToFirstTokenBuckets(), {"model_name"})
      .WithLabels({"m"})
      .Observe(0.2);
  registry.AddHistogram(kIterationTokens, "Tokens per step.", IterationTokenBuckets(2048), {"model_name"})
      .WithLabels({"m"})
      .Observe(17);
  registry.AddHistogram(kRequestQueueTimeSeconds, "Queue.", RequestLatencyBuckets(), {"model_name", "stage"})
      .WithLabels({"m", "prefill"})
      .Observe(0.01);
  registry.AddCounter(kKvTransferBytesTotal, "Bytes.", {"model_name", "direction"})
      .WithLabels({"m", "sent"})
      .Increment(4096);
  registry.AddGauge(kCacheConfigInfo, "Cache config.", {"model_name", "block_size"}).WithLabels({"m", "16"}).Set(1);
  std::string text = registry.RenderText();
  EXPECT_NE(text.find(std::string(kTimeToFirstTokenSeconds) + "_bucket{model_name=\"m\",le=\"0.25\"} 1"),
            std::string::npos)
      << text;
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
