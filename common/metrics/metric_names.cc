#include "common/metrics/metric_names.h"

namespace tandem::metrics {

std::vector<double> TimeToFirstTokenBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.02, 0.04, 0.06, 0.08,  0.1,   0.25,  0.5,
          0.75,   1.0,   2.5,    5.0,   7.5,    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> InterTokenLatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,
          0.3,    0.4,   0.5,    0.75,  1.0,    2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0};
}

std::vector<double> RequestLatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,  0.2,  0.3,   0.5,   0.8,   1.0,   1.5,    2.0,   2.5,
          5.0,   10.0,   15.0,  20.0, 30.0,  40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> TransferSecondsBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};
}

std::vector<double> TokenCountBuckets(int max_tokens) {
  std::vector<double> bounds = {1};
  for (double scale = 1;; scale *= 10) {
    for (double mantissa : {2.0, 5.0, 10.0}) {
      if (mantissa * scale > max_tokens) return bounds;
      bounds.push_back(mantissa * scale);
    }
  }
}

std::vector<double> IterationTokenBuckets(int max_tokens) {
  std::vector<double> bounds = {1};
  for (double b = 8; b < max_tokens; b *= 2) bounds.push_back(b);
  if (max_tokens > 1) bounds.push_back(max_tokens);
  return bounds;
}

}  // namespace tandem::metrics
