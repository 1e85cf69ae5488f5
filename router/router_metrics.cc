#include "router/router_metrics.h"

namespace tandem::router {

void RouterMetrics::OnRejected(const char* reason) const {
  if (m_) m_->requests_rejected->WithLabels({reason}).Increment();
}

void RouterMetrics::OnAdmitted(double queue_seconds) const {
  if (m_) m_->request_queue_time->WithLabels({"router"}).Observe(queue_seconds);
}

void RouterMetrics::SetLoad(int32_t running, int32_t waiting) const {
  if (!m_) return;
  m_->num_requests_running->Get().Set(running);
  m_->num_requests_waiting->Get().Set(waiting);
}

void RouterMetrics::OnFirstToken(double seconds_since_arrival) const {
  if (m_) m_->time_to_first_token->Get().Observe(seconds_since_arrival);
}

void RouterMetrics::OnTokens(double seconds, int32_t count) const {
  if (!m_ || count <= 0) return;
  // Tokens of one batch share the gap: each gets an equal part of it.
  metrics::Histogram& itl = m_->inter_token_latency->Get();
  for (int32_t i = 0; i < count; ++i) itl.Observe(seconds / count);
}

void RouterMetrics::OnChoiceFinished(const char* finished_reason) const {
  if (m_) m_->request_success->WithLabels({finished_reason}).Increment();
}

void RouterMetrics::OnRequestFinished(int64_t prompt_tokens, int64_t completion_tokens,
                                      double e2e_seconds) const {
  if (!m_) return;
  m_->prompt_tokens->Get().Increment(static_cast<double>(prompt_tokens));
  m_->generation_tokens->Get().Increment(static_cast<double>(completion_tokens));
  m_->e2e_request_latency->Get().Observe(e2e_seconds);
}

}  // namespace tandem::router
