// A small metrics registry: counters, gauges and histograms with labels,
// rendered in the Prometheus text exposition format (version 0.0.4).
//
//   MetricsRegistry registry;
//   auto& requests = registry.AddCounter("tandem_request_success_total", "Finished requests.",
//                                        {"finished_reason"});
//   requests.WithLabels({"stop"}).Increment();
//   std::string body = registry.RenderText();  // serve at GET /metrics
//
// Names and label names are code constants (see metric_names.h); label values
// come from code too (enums, tier names), never from user input. A bad name,
// a duplicate family or a wrong label count is a bug and aborts.
//
// Thread rule: everything is thread-safe. Updates to a child are lock-free
// atomics; WithLabels takes the family's lock (cache the returned reference on
// hot paths: it stays valid for the registry's lifetime).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tandem::metrics {

// Monotonic count. Increment by delta >= 0.
class Counter {
 public:
  void Increment(double delta = 1.0);
  // For a counter that mirrors a monotonic total kept elsewhere (CPU time, an engine's
  // count): raises the value to `total`; never lowers it.
  void AdvanceTo(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Distribution over fixed upper bounds (le), plus sum and count.
class Histogram {
 public:
  // bounds: strictly increasing, finite; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    double sum = 0;
  };
  Snapshot Snap() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0.0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// All children of one metric name, keyed by label values.
template <typename M>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::vector<double> bounds)
      : label_names_(std::move(label_names)), bounds_(std::move(bounds)) {}

  // The child for these label values, created on first use.
  // REQUIRES: values.size() == number of label names.
  M& WithLabels(const std::vector<std::string>& values);
  // The child of a family without labels.
  M& Get() { return WithLabels({}); }

  const std::vector<std::string>& label_names() const { return label_names_; }
  // Visits children in label-value order under the family lock.
  template <typename F>
  void ForEach(F&& visit) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [values, child] : children_) visit(values, *child);
  }

 private:
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;  // guarded by mu_
};

class MetricsRegistry {
 public:
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> label_names = {});
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                                  std::vector<std::string> label_names = {});

  // Every family in registration order, in the Prometheus text format.
  std::string RenderText() const;

 private:
  struct Entry {
    std::string name;
    std::string help;
    MetricType type;
    std::unique_ptr<Family<Counter>> counters;
    std::unique_ptr<Family<Gauge>> gauges;
    std::unique_ptr<Family<Histogram>> histograms;
  };
  Entry& AddEntry(const std::string& name, const std::string& help, MetricType type,
                  const std::vector<std::string>& label_names);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;  // guarded by mu_
};

// The content type to serve RenderText() with.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tandem::metrics
