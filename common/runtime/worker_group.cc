#include "common/runtime/worker_group.h"

#include "common/base/check.h"

namespace tandem::runtime {

WorkerGroup::WorkerGroup(int num_threads) {
  TANDEM_CHECK(num_threads >= 1) << "WorkerGroup of " << num_threads << " threads";
  threads_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

WorkerGroup::~WorkerGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerGroup::Run(int num_tasks, const std::function<void(int)>& task) {
  if (num_tasks <= 0) return;
  if (num_tasks == 1 || threads_.empty()) {
    for (int i = 0; i < num_tasks; ++i) task(i);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &task;
  num_tasks_ = num_tasks;
  next_task_ = 0;
  unfinished_ = num_tasks;
  ++batch_;
  work_cv_.notify_all();
  Drain(lock);
  done_cv_.wait(lock, [this] { return unfinished_ == 0; });
  task_ = nullptr;
}

void WorkerGroup::Drain(std::unique_lock<std::mutex>& lock) {
  while (next_task_ < num_tasks_) {
    const int i = next_task_++;
    const std::function<void(int)>* task = task_;
    lock.unlock();
    (*task)(i);
    lock.lock();
    if (--unfinished_ == 0) done_cv_.notify_all();
  }
}

void WorkerGroup::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t seen = 0;
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || batch_ != seen; });
    if (stop_) return;
    seen = batch_;
    Drain(lock);
  }
}

}  // namespace tandem::runtime
