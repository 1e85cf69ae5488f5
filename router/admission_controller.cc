#include "router/admission_controller.h"

#include "common/base/check.h"

namespace tandem::router {

AdmissionController::AdmissionController(int32_t max_running, int32_t max_queued)
    : max_running_(max_running), max_queued_(max_queued) {
  TANDEM_CHECK(max_running > 0 && max_queued >= 0);
}

AdmissionController::Outcome AdmissionController::Acquire(std::function<void()> on_admitted, Ticket* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ < max_running_ && queue_.empty()) {
    ++running_;
    return Outcome::kAdmitted;
  }
  if (static_cast<int32_t>(queue_.size()) >= max_queued_) return Outcome::kRejected;
  *ticket = next_ticket_++;
  queue_.push_back({*ticket, std::move(on_admitted)});
  return Outcome::kQueued;
}

void AdmissionController::Release() {
  std::function<void()> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TANDEM_CHECK_GT(running_, 0) << "Release without a held slot";
    if (queue_.empty()) {
      --running_;
      return;
    }
    // The slot passes straight to the oldest waiter; running_ is unchanged.
    next = std::move(queue_.front().on_admitted);
    queue_.pop_front();
  }
  next();
}

bool AdmissionController::CancelQueued(Ticket ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->ticket == ticket) {
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

int32_t AdmissionController::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

int32_t AdmissionController::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(queue_.size());
}

}  // namespace tandem::router
