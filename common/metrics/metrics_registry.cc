#include "common/metrics/metrics_registry.h"

#include <algorithm>
#include <cmath>

#include "common/base/check.h"
#include "common/metrics/exposition.h"

namespace tandem::metrics {
namespace {

// Children per family; label values are code constants, so more is a bug.
constexpr size_t kMaxChildrenPerFamily = 10000;

void AtomicAdd(std::atomic<double>& target, double delta) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

// {a="x",b="y"} with an optional extra le label; "" when there are no labels.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& le = "") {
  if (names.empty() && le.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i] + "=\"" + EscapeLabelValue(values[i]) + "\"";
  }
  if (!le.empty()) {
    if (!names.empty()) out += ',';
    out += "le=\"" + le + "\"";
  }
  return out + "}";
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

void Counter::Increment(double delta) {
  TANDEM_CHECK(delta >= 0) << "counters only go up; delta=" << delta;
  AtomicAdd(value_, delta);
}

void Counter::AdvanceTo(double total) {
  double current = value_.load(std::memory_order_relaxed);
  while (total > current && !value_.compare_exchange_weak(current, total, std::memory_order_relaxed)) {
  }
}

void Gauge::Add(double delta) { AtomicAdd(value_, delta); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::Observe(double value) {
  // le is inclusive: the first bound >= value. NaN lands in +Inf only.
  size_t bucket =
      std::isnan(value) ? bounds_.size() : std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

Histogram::Snapshot Histogram::Snap() const {
  Snapshot snap;
  snap.bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    snap.cumulative.push_back(running);
  }
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

template <typename M>
M& Family<M>::WithLabels(const std::vector<std::string>& values) {
  TANDEM_CHECK_EQ(values.size(), label_names_.size()) << "wrong number of label values";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(values);
  if (it != children_.end()) return *it->second;
  TANDEM_CHECK(children_.size() < kMaxChildrenPerFamily) << "label values look unbounded";
  std::unique_ptr<M> child;
  if constexpr (std::is_same_v<M, Histogram>) {
    child = std::make_unique<Histogram>(bounds_);
  } else {
    child = std::make_unique<M>();
  }
  M& ref = *child;
  children_.emplace(values, std::move(child));
  return ref;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

MetricsRegistry::Entry& MetricsRegistry::AddEntry(const std::string& name, const std::string& help, MetricType type,
                                                  const std::vector<std::string>& label_names) {
  TANDEM_CHECK(IsValidMetricName(name)) << "bad metric name '" << name << "'";
  for (const std::string& label : label_names) {
    TANDEM_CHECK(IsValidLabelName(label) && label != "le") << "bad label name '" << label << "'";
  }
  for (const auto& entry : entries_) {
    TANDEM_CHECK(entry->name != name) << "metric '" << name << "' registered twice";
  }
  auto entry = std::make_unique<Entry>();
  entry->name = name;
  entry->help = help;
  entry->type = type;
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

Family<Counter>& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = AddEntry(name, help, MetricType::kCounter, label_names);
  entry.counters = std::make_unique<Family<Counter>>(std::move(label_names), std::vector<double>{});
  if (entry.counters->label_names().empty()) entry.counters->Get();  // render 0 from the start
  return *entry.counters;
}

Family<Gauge>& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = AddEntry(name, help, MetricType::kGauge, label_names);
  entry.gauges = std::make_unique<Family<Gauge>>(std::move(label_names), std::vector<double>{});
  if (entry.gauges->label_names().empty()) entry.gauges->Get();
  return *entry.gauges;
}

Family<Histogram>& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                                 std::vector<double> bounds, std::vector<std::string> label_names) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    TANDEM_CHECK(std::isfinite(bounds[i])) << name << ": bucket bounds must be finite";
    TANDEM_CHECK(i == 0 || bounds[i] > bounds[i - 1]) << name << ": bounds must increase";
  }
  std::lock_guard<std::mutex> lock(mu_);
  Entry& entry = AddEntry(name, help, MetricType::kHistogram, label_names);
  entry.histograms = std::make_unique<Family<Histogram>>(std::move(label_names), std::move(bounds));
  if (entry.histograms->label_names().empty()) entry.histograms->Get();
  return *entry.histograms;
}

std::string MetricsRegistry::RenderText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& entry : entries_) {
    const std::string& name = entry->name;
    out += "# HELP " + name + " " + EscapeHelp(entry->help) + "\n";
    out += "# TYPE " + name + " " + TypeName(entry->type) + "\n";
    if (entry->counters) {
      const auto& labels = entry->counters->label_names();
      entry->counters->ForEach([&](const std::vector<std::string>& values, const Counter& counter) {
        out += name + LabelSet(labels, values) + " " + FormatValue(counter.value()) + "\n";
      });
    } else if (entry->gauges) {
      const auto& labels = entry->gauges->label_names();
      entry->gauges->ForEach([&](const std::vector<std::string>& values, const Gauge& gauge) {
        out += name + LabelSet(labels, values) + " " + FormatValue(gauge.value()) + "\n";
      });
    } else {
      const auto& labels = entry->histograms->label_names();
      entry->histograms->ForEach([&](const std::vector<std::string>& values, const Histogram& histogram) {
        Histogram::Snapshot snap = histogram.Snap();
        for (size_t i = 0; i < snap.bounds.size(); ++i) {
          out += name + "_bucket" + LabelSet(labels, values, FormatValue(snap.bounds[i])) + " " +
                 std::to_string(snap.cumulative[i]) + "\n";
        }
        uint64_t count = snap.cumulative.back();
        out += name + "_bucket" + LabelSet(labels, values, "+Inf") + " " + std::to_string(count) + "\n";
        out += name + "_sum" + LabelSet(labels, values) + " " + FormatValue(snap.sum) + "\n";
        out += name + "_count" + LabelSet(labels, values) + " " + std::to_string(count) + "\n";
      });
    }
  }
  return out;
}

}  // namespace tandem::metrics
