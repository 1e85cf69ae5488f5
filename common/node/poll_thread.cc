#include "common/node/poll_thread.h"

#include <chrono>
#include <future>
#include <thread>

namespace tandem::node {

PollThread::~PollThread() { Stop(); }

void PollThread::Start(std::function<void()> poll, std::function<Pace()> pace) {
  poll_ = std::move(poll);
  pace_ = std::move(pace);
  thread_ = std::thread([this] { Loop(); });
}

void PollThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PollThread::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void PollThread::RunSync(std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> waited = done->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || !thread_.joinable()) {
      fn();  // no thread: the caller is the only user
      return;
    }
    queue_.push_back([fn = std::move(fn), done] {
      fn();
      done->set_value();
    });
  }
  cv_.notify_one();
  waited.wait();
}

void PollThread::Loop() {
  while (true) {
    std::deque<std::function<void()>> work;
    bool stop = false;
    Pace pace = Pace::kIdle;
    {
      std::unique_lock<std::mutex> lock(mu_);
      pace = pace_ ? pace_() : Pace::kIdle;
      if (pace != Pace::kSpin) {
        cv_.wait_for(lock, pace == Pace::kBusy ? std::chrono::microseconds(200) : std::chrono::microseconds(5000),
                     [this] { return stop_ || !queue_.empty(); });
      }
      work.swap(queue_);
      stop = stop_;
    }
    // Spinning yields the core between polls, so a loaded machine still runs everything else.
    if (pace == Pace::kSpin && work.empty()) std::this_thread::yield();
    for (auto& fn : work) fn();
    if (poll_) poll_();
    if (stop) return;
  }
}

}  // namespace tandem::node
