#include "tools/bench_serving/metrics_delta.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/metrics/metrics_registry.h"
#include "tools/bench_serving/server_report.h"

namespace tandem::bench {
namespace {

MetricsSnapshot Snapshot(const metrics::MetricsRegistry& registry) {
  StatusOr<PromPage> page = ParsePrometheusText(registry.RenderText());
  EXPECT_TRUE(page.ok()) << page.status().ToString();
  return page.ok() ? Collect(*page, "tandem_") : MetricsSnapshot{};
}

TEST(MetricsDeltaTest, ParsesSamplesLabelsAndTypes) {
  auto page = ParsePrometheusText(
      "# HELP x_total Help with \\\\ and \\n.\n"
      "# TYPE x_total counter\n"
      "x_total{a=\"1\",b=\"q\\\"uote\\\\\"} 42 1700000000000\r\n"
      "\n"
      "  y_bucket{le=\"+Inf\",} +Inf\n"
      "z 1.5e-3\n");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->types.at("x_total"), "counter");
  ASSERT_EQ(page->samples.size(), 3u);
  EXPECT_EQ(page->samples[0].name, "x_total");
  ASSERT_EQ(page->samples[0].labels.size(), 2u);
  EXPECT_EQ(page->samples[0].labels[1].first, "b");
  EXPECT_EQ(page->samples[0].labels[1].second, "q\"uote\\");
  EXPECT_DOUBLE_EQ(page->samples[0].value, 42);
  EXPECT_EQ(page->samples[1].labels[0].second, "+Inf");
  EXPECT_TRUE(std::isinf(page->samples[1].value));
  EXPECT_DOUBLE_EQ(page->samples[2].value, 1.5e-3);

  EXPECT_FALSE(ParsePrometheusText("x{a=1} 2\n").ok());
  EXPECT_FALSE(ParsePrometheusText("x{a=\"1\" 2\n").ok());
  EXPECT_FALSE(ParsePrometheusText("x one\n").ok());
  EXPECT_FALSE(ParsePrometheusText("{a=\"1\"} 2\n").ok());
}

// The project's own registry renders the page; the delta and its quantiles are
// checked against values worked out by hand from the observations.
TEST(MetricsDeltaTest, HistogramDeltaAndQuantilesFromTheRegistryPage) {
  metrics::MetricsRegistry registry;
  auto& h = registry.AddHistogram("tandem_t_seconds", "t", {1, 2, 4}, {"stage"});
  auto& bytes = registry.AddCounter("tandem_b_total", "b", {"direction"});
  registry.AddGauge("tandem_g", "g").Get().Set(7);
  h.WithLabels({"router"}).Observe(0.5);
  h.WithLabels({"router"}).Observe(1.5);
  bytes.WithLabels({"received"}).Increment(100);
  MetricsSnapshot before = Snapshot(registry);
  for (double v : {1.5, 3.0, 3.0, 10.0}) h.WithLabels({"router"}).Observe(v);
  h.WithLabels({"prefill"}).Observe(0.25);
  bytes.WithLabels({"received"}).Increment(1000);
  MetricsSnapshot delta = Delta(before, Snapshot(registry));

  EXPECT_TRUE(delta.counters.count("tandem_g") == 0 && delta.histograms.count("tandem_g") == 0);
  EXPECT_DOUBLE_EQ(delta.counters.at("tandem_b_total{direction=\"received\"}"), 1000);
  const HistogramData& router = delta.histograms.at("tandem_t_seconds{stage=\"router\"}");
  EXPECT_DOUBLE_EQ(router.count, 4);
  EXPECT_DOUBLE_EQ(router.sum, 17.5);
  ASSERT_EQ(router.cumulative.size(), 4u);
  EXPECT_EQ(router.cumulative, (std::vector<double>{0, 1, 3, 4}));
  EXPECT_TRUE(std::isinf(router.upper_bounds.back()));
  EXPECT_DOUBLE_EQ(HistogramQuantile(router, 0.25), 2);  // rank 1: all of bucket (1, 2]
  EXPECT_DOUBLE_EQ(HistogramQuantile(router, 0.5), 3);   // rank 2: half of bucket (2, 4]
  EXPECT_DOUBLE_EQ(HistogramQuantile(router, 0.9), 4);   // rank 3.6: in +Inf -> highest finite bound
  HistogramStats st = Stats(router);
  EXPECT_DOUBLE_EQ(st.mean, 4.375);
  EXPECT_DOUBLE_EQ(st.p50, 3);
  EXPECT_DOUBLE_EQ(st.p99, 4);
  EXPECT_FALSE(InFirstBucket(router, 0.01));  // bucket (0, 1] is empty: rank 0.04 > 0 lands past it
  // A series new since `before` counts from zero.
  EXPECT_DOUBLE_EQ(delta.histograms.at("tandem_t_seconds{stage=\"prefill\"}").count, 1);
  EXPECT_DOUBLE_EQ(HistogramQuantile(delta.histograms.at("tandem_t_seconds{stage=\"prefill\"}"), 0.5), 0.5);
}

TEST(MetricsDeltaTest, QuantileEdgesAndRestartedProcess) {
  HistogramData h;
  h.upper_bounds = {10, INFINITY};
  h.cumulative = {2, 2};
  h.count = 2;
  h.sum = 10;
  EXPECT_DOUBLE_EQ(HistogramQuantile(h, 0.5), 5);  // first bucket: from 0
  EXPECT_DOUBLE_EQ(HistogramQuantile(h, 1.0), 10);
  EXPECT_TRUE(InFirstBucket(h, 0.99));
  EXPECT_TRUE(std::isnan(HistogramQuantile(HistogramData{}, 0.5)));
  EXPECT_DOUBLE_EQ(Stats(HistogramData{}).mean, 0);

  MetricsSnapshot before, after;
  before.counters["c"] = 50;
  after.counters["c"] = 20;  // restarted: counts since the restart
  before.histograms["h"] = h;
  HistogramData restarted = h;
  restarted.cumulative = {1, 1};
  restarted.count = 1;
  after.histograms["h"] = restarted;
  MetricsSnapshot d = Delta(before, after);
  EXPECT_DOUBLE_EQ(d.counters.at("c"), 20);
  EXPECT_DOUBLE_EQ(d.histograms.at("h").count, 1);
}

TEST(MetricsDeltaTest, ServerReportKvTransferRateAndUnavailablePages) {
  metrics::MetricsRegistry registry;
  auto& seconds = registry.AddHistogram("tandem_kv_transfer_seconds", "s", {0.1, 1});
  auto& bytes = registry.AddCounter("tandem_kv_transfer_bytes_total", "b", {"direction"});
  auto& fast = registry.AddHistogram("tandem_fast_seconds", "f", {0.1, 1});
  MetricsSnapshot before = Snapshot(registry);
  fast.Get().Observe(0.01);
  seconds.Get().Observe(0.2);
  seconds.Get().Observe(0.3);
  bytes.WithLabels({"received"}).Increment(1e9);
  std::vector<SourceDelta> sources = {{"decode", "", Delta(before, Snapshot(registry))},
                                      {"router", "GET 127.0.0.1:1/metrics: refused", {}}};
  KvTransferTotals kv = KvTransfer(sources[0].delta);
  EXPECT_DOUBLE_EQ(kv.transfers, 2);
  EXPECT_DOUBLE_EQ(kv.seconds, 0.5);
  EXPECT_DOUBLE_EQ(kv.GigabytesPerSecond(), 2);
  std::string table = FormatServerReport(sources);
  EXPECT_NE(table.find("| decode | tandem_kv_transfer_seconds | 2 | 250.00 ms | 550.00 / 910.00 / 991.00 ms |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| decode | tandem_fast_seconds | 1 | 10.00 ms | <=100.00 / <=100.00 / <=100.00 ms |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| 2 | 500.00 MB | 2.000 GB/s |"), std::string::npos) << table;
  EXPECT_NE(table.find("| router | n/a: GET 127.0.0.1:1/metrics: refused"), std::string::npos) << table;
  EXPECT_NE(table.find("approximate"), std::string::npos);
  nlohmann::json j = ServerReportJson(sources);
  EXPECT_DOUBLE_EQ(j["decode"]["kv_transfer"]["gb_per_s"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(j["decode"]["histograms"]["tandem_kv_transfer_seconds"]["mean"].get<double>(), 0.25);
  EXPECT_EQ(j["router"]["error"], "GET 127.0.0.1:1/metrics: refused");
}

}  // namespace
}  // namespace tandem::bench
