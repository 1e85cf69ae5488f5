#include "router/router_metrics.h"

#include "common/metrics/metric_names.h"

namespace tandem::router {

RouterMetrics::RouterMetrics(metrics::MetricsRegistry* registry, const std::string& model_name, int32_t max_model_len)
    : model_name_(model_name) {
  if (registry == nullptr) return;
  metrics::MetricsRegistry& r = *registry;
  const std::vector<std::string> model = {model_name};
  auto histogram = [&](const char* name, const char* help, std::vector<double> bounds) {
    return &r.AddHistogram(name, help, std::move(bounds), {"model_name"}).WithLabels(model);
  };
  ttft_ = histogram(metrics::kTimeToFirstTokenSeconds, "Time from request arrival to its first token, seconds.",
                    metrics::TimeToFirstTokenBuckets());
  itl_ = histogram(metrics::kInterTokenLatencySeconds, "Time between consecutive output tokens of a request, seconds.",
                   metrics::InterTokenLatencyBuckets());
  tpot_ = histogram(metrics::kTimePerOutputTokenSeconds,
                    "Time per output token, seconds: the inter-token latency samples under vLLM's older name.",
                    metrics::InterTokenLatencyBuckets());
  request_tpot_ = histogram(metrics::kRequestTimePerOutputTokenSeconds,
                            "Per request: first to last token over the tokens after the first, seconds.",
                            metrics::InterTokenLatencyBuckets());
  e2e_ = histogram(metrics::kE2eRequestLatencySeconds, "Time from request arrival to its last token, seconds.",
                   metrics::RequestLatencyBuckets());
  queue_ = &r.AddHistogram(metrics::kRequestQueueTimeSeconds, "Time a request waited in a queue, seconds, by stage.",
                           metrics::RequestLatencyBuckets(), {"model_name", "stage"})
                .WithLabels({model_name, "router"});
  request_prompt_tokens_ = histogram(metrics::kRequestPromptTokens, "Prompt tokens per finished request.",
                                     metrics::TokenCountBuckets(max_model_len));
  request_generation_tokens_ = histogram(metrics::kRequestGenerationTokens, "Output tokens per finished request.",
                                         metrics::TokenCountBuckets(max_model_len));
  running_ = &r.AddGauge(metrics::kNumRequestsRunning, "Requests running now.", {"model_name"}).WithLabels(model);
  waiting_ =
      &r.AddGauge(metrics::kNumRequestsWaiting, "Requests waiting to run now.", {"model_name"}).WithLabels(model);
  prompt_tokens_ = &r.AddCounter(metrics::kPromptTokensTotal, "Prompt tokens of finished requests.", {"model_name"})
                        .WithLabels(model);
  generation_tokens_ =
      &r.AddCounter(metrics::kGenerationTokensTotal, "Output tokens of finished requests.", {"model_name"})
           .WithLabels(model);
  success_ = &r.AddCounter(metrics::kRequestSuccessTotal, "Requests finished, by finish reason.",
                           {"model_name", "finished_reason"});
  rejected_ = &r.AddCounter(metrics::kRequestsRejectedTotal, "Requests refused by admission control, by reason.",
                            {"model_name", "reason"});
  // Every series renders from the first scrape.
  for (const char* reason : {"stop", "length", "abort", "error"}) success_->WithLabels({model_name, reason});
  for (const char* reason : {"queue_full", "overloaded", "no_nodes", "draining"}) rejected_->WithLabels({model_name, reason});
}

void RouterMetrics::OnRejected(const char* reason) const {
  if (rejected_) rejected_->WithLabels({model_name_, reason}).Increment();
}

void RouterMetrics::OnAdmitted(double queue_seconds) const {
  if (queue_) queue_->Observe(queue_seconds);
}

void RouterMetrics::SetLoad(int32_t running, int32_t waiting) const {
  if (!running_) return;
  running_->Set(running);
  waiting_->Set(waiting);
}

void RouterMetrics::OnFirstToken(double seconds_since_arrival) const {
  if (ttft_) ttft_->Observe(seconds_since_arrival);
}

void RouterMetrics::OnTokens(double seconds, int32_t count) const {
  if (!itl_ || count <= 0) return;
  // Tokens of one batch share the gap: each gets an equal part of it.
  for (int32_t i = 0; i < count; ++i) {
    itl_->Observe(seconds / count);
    tpot_->Observe(seconds / count);
  }
}

void RouterMetrics::OnChoiceFinished(const char* finished_reason) const {
  if (success_) success_->WithLabels({model_name_, finished_reason}).Increment();
}

void RouterMetrics::OnRequestFinished(int64_t prompt_tokens, int64_t completion_tokens, int32_t num_choices,
                                      double e2e_seconds, double decode_seconds) const {
  if (!e2e_) return;
  prompt_tokens_->Increment(static_cast<double>(prompt_tokens));
  generation_tokens_->Increment(static_cast<double>(completion_tokens));
  e2e_->Observe(e2e_seconds);
  request_prompt_tokens_->Observe(static_cast<double>(prompt_tokens));
  request_generation_tokens_->Observe(static_cast<double>(completion_tokens));
  // A request of one token per choice has no time per output token.
  const double tokens_per_choice = num_choices > 0 ? static_cast<double>(completion_tokens) / num_choices : 0;
  if (tokens_per_choice > 1) request_tpot_->Observe(decode_seconds / (tokens_per_choice - 1));
}

}  // namespace tandem::router
