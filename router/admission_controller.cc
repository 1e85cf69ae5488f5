#include "router/admission_controller.h"

#include "common/base/check.h"

namespace tandem::router {

AdmissionController::AdmissionController(int32_t max_running, int32_t max_queued)
    : max_running_(max_running), max_queued_(max_queued) {
  TANDEM_CHECK(max_running > 0 && max_queued >= 0);
}

AdmissionController::Outcome AdmissionController::Acquire(PriorityClass priority, std::function<void()> on_admitted,
                                                          Ticket* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  // Waiters exist only while every slot is taken (Release hands slots over).
  if (running_ < max_running_ && num_queued_ == 0) {
    ++running_;
    return Outcome::kAdmitted;
  }
  if (num_queued_ >= max_queued_) return Outcome::kRejected;
  *ticket = next_ticket_++;
  queues_[static_cast<int>(priority)].push_back({*ticket, std::move(on_admitted)});
  ++num_queued_;
  return Outcome::kQueued;
}

void AdmissionController::Release() {
  std::function<void()> next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TANDEM_CHECK_GT(running_, 0) << "Release without a held slot";
    if (num_queued_ == 0) {
      --running_;
      return;
    }
    // The slot passes straight to the next waiter; running_ is unchanged.
    for (std::deque<Waiter>& queue : queues_) {
      if (queue.empty()) continue;
      next = std::move(queue.front().on_admitted);
      queue.pop_front();
      --num_queued_;
      break;
    }
  }
  next();
}

bool AdmissionController::CancelQueued(Ticket ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::deque<Waiter>& queue : queues_) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->ticket == ticket) {
        queue.erase(it);
        --num_queued_;
        return true;
      }
    }
  }
  return false;
}

int32_t AdmissionController::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

void AdmissionController::Publish(const std::function<void(int32_t running, int32_t queued)>& publish) const {
  std::lock_guard<std::mutex> lock(mu_);
  publish(running_, num_queued_);
}

int32_t AdmissionController::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_queued_;
}

}  // namespace tandem::router
