#include "common/metrics/metrics_registry.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tandem::metrics {
namespace {

TEST(MetricsRegistryTest, RendersExactText) {
  MetricsRegistry registry;
  auto& success = registry.AddCounter("tandem_request_success_total", "Finished requests.", {"finished_reason"});
  success.WithLabels({"stop"}).Increment(3);
  success.WithLabels({"length"}).Increment();
  registry.AddGauge("tandem_num_requests_running", "Requests running now.").Get().Set(2);
  auto& ttft = registry.AddHistogram("tandem_ttft_seconds", "Time to first token.\nIn seconds.", {0.1, 1, 2.5});
  ttft.Get().Observe(0.05);
  ttft.Get().Observe(0.1);  // le is inclusive: still the 0.1 bucket
  ttft.Get().Observe(2);
  ttft.Get().Observe(100);
  const char* expected =
      "# HELP tandem_request_success_total Finished requests.\n"
      "# TYPE tandem_request_success_total counter\n"
      "tandem_request_success_total{finished_reason=\"length\"} 1\n"
      "tandem_request_success_total{finished_reason=\"stop\"} 3\n"
      "# HELP tandem_num_requests_running Requests running now.\n"
      "# TYPE tandem_num_requests_running gauge\n"
      "tandem_num_requests_running 2\n"
      "# HELP tandem_ttft_seconds Time to first token.\\nIn seconds.\n"
      "# TYPE tandem_ttft_seconds histogram\n"
      "tandem_ttft_seconds_bucket{le=\"0.1\"} 2\n"
      "tandem_ttft_seconds_bucket{le=\"1\"} 2\n"
      "tandem_ttft_seconds_bucket{le=\"2.5\"} 3\n"
      "tandem_ttft_seconds_bucket{le=\"+Inf\"} 4\n"
      "tandem_ttft_seconds_sum 102.15\n"
      "tandem_ttft_seconds_count 4\n";
  EXPECT_EQ(registry.RenderText(), expected);
}

TEST(MetricsRegistryTest, HistogramWithLabelsPutsLeLastAndEscapesValues) {
  MetricsRegistry registry;
  auto& queue = registry.AddHistogram("q_seconds", "Queue time.", {1}, {"stage", "tier"});
  queue.WithLabels({"pre\"fill", "a\\b"}).Observe(0.5);
  const char* expected =
      "# HELP q_seconds Queue time.\n"
      "# TYPE q_seconds histogram\n"
      "q_seconds_bucket{stage=\"pre\\\"fill\",tier=\"a\\\\b\",le=\"1\"} 1\n"
      "q_seconds_bucket{stage=\"pre\\\"fill\",tier=\"a\\\\b\",le=\"+Inf\"} 1\n"
      "q_seconds_sum{stage=\"pre\\\"fill\",tier=\"a\\\\b\"} 0.5\n"
      "q_seconds_count{stage=\"pre\\\"fill\",tier=\"a\\\\b\"} 1\n";
  EXPECT_EQ(registry.RenderText(), expected);
}

TEST(MetricsRegistryTest, LabeledFamilyWithoutChildrenRendersOnlyHeaders) {
  MetricsRegistry registry;
  registry.AddGauge("g", "A gauge.", {"tier"});
  EXPECT_EQ(registry.RenderText(), "# HELP g A gauge.\n# TYPE g gauge\n");
}

TEST(MetricsRegistryTest, GaugeGoesBothWaysAndChildrenAreStable) {
  MetricsRegistry registry;
  auto& family = registry.AddGauge("g", "A gauge.", {"tier"});
  Gauge& gpu = family.WithLabels({"gpu"});
  gpu.Add(5);
  gpu.Add(-7);
  EXPECT_EQ(&family.WithLabels({"gpu"}), &gpu);
  EXPECT_EQ(gpu.value(), -2);
  gpu.Set(0.25);
  EXPECT_EQ(gpu.value(), 0.25);
}

TEST(MetricsRegistryTest, CounterAdvancesToATotalAndNeverBack) {
  MetricsRegistry registry;
  Counter& c = registry.AddCounter("tandem_test_cpu_seconds_total", "A mirrored total.").Get();
  c.AdvanceTo(1.5);
  EXPECT_DOUBLE_EQ(c.value(), 1.5);
  c.AdvanceTo(1.0);  // a stale reading does not lower it
  EXPECT_DOUBLE_EQ(c.value(), 1.5);
  c.AdvanceTo(4.25);
  EXPECT_DOUBLE_EQ(c.value(), 4.25);
}

TEST(MetricsRegistryTest, ConcurrentUpdatesAreNotLost) {
  MetricsRegistry registry;
  auto& counter = registry.AddCounter("c_total", "A counter.", {"k"});
  auto& histogram = registry.AddHistogram("h", "A histogram.", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        counter.WithLabels({t % 2 ? "odd" : "even"}).Increment();
        histogram.Get().Observe(i % 2 ? 1.0 : 0.0);
        if (i % 1000 == 0) registry.RenderText();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.WithLabels({"odd"}).value(), 20000);
  EXPECT_EQ(counter.WithLabels({"even"}).value(), 20000);
  Histogram::Snapshot snap = histogram.Get().Snap();
  EXPECT_EQ(snap.cumulative[0], 20000u);
  EXPECT_EQ(snap.cumulative[1], 40000u);
  EXPECT_EQ(snap.sum, 20000);
}

TEST(MetricsRegistryDeathTest, MisuseIsABug) {
  EXPECT_DEATH(
      {
        MetricsRegistry registry;
        registry.AddCounter("dup_total", "x");
        registry.AddCounter("dup_total", "y");
      },
      "registered twice");
  EXPECT_DEATH(
      {
        MetricsRegistry registry;
        registry.AddCounter("bad-name", "x");
      },
      "bad metric name");
  EXPECT_DEATH(
      {
        MetricsRegistry registry;
        registry.AddCounter("c_total", "x", {"a"}).WithLabels({"1", "2"});
      },
      "label values");
  EXPECT_DEATH(
      {
        MetricsRegistry registry;
        registry.AddCounter("c_total", "x").Get().Increment(-1);
      },
      "only go up");
  EXPECT_DEATH(
      {
        MetricsRegistry registry;
        registry.AddHistogram("h", "x", {1, 1});
      },
      "increase");
}

}  // namespace
}  // namespace tandem::metrics
