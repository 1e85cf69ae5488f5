// WorkerGroup: a few host threads that run batches of independent tasks together
// with the calling thread, for splitting bulk host work (weight copies and
// conversions) across cores. The threads live as long as the group.
// Thread rule: Run is called by one thread at a time (the owner); tasks run on
// the workers and on that thread, concurrently with each other.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem::runtime {

class WorkerGroup {
 public:
  // `num_threads` threads in all, the caller of Run included (so num_threads - 1
  // are started). REQUIRES: num_threads >= 1.
  explicit WorkerGroup(int num_threads);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  int num_threads() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs task(0) .. task(num_tasks - 1), each once, on the workers and the calling
  // thread; returns when all have finished. One task runs inline.
  void Run(int num_tasks, const std::function<void(int)>& task);

 private:
  void WorkerLoop();
  // Runs tasks of the current batch until none is left. REQUIRES: `lock` holds mu_.
  void Drain(std::unique_lock<std::mutex>& lock);

  std::mutex mu_;
  std::condition_variable work_cv_;                 // a batch started, or stopping
  std::condition_variable done_cv_;                 // the batch's last task finished
  const std::function<void(int)>* task_ = nullptr;  // the current batch's task
  int num_tasks_ = 0;                               // tasks in the current batch
  int next_task_ = 0;                               // the next one to claim
  int unfinished_ = 0;                              // claimed or not, not yet finished
  uint64_t batch_ = 0;                              // batches started so far
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tandem::runtime
