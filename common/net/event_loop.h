// EventLoop: the I/O threads of the control plane. One per process, shared by
// every RpcServer and RpcClient in it. Connection callbacks run on these
// threads (each connection's callbacks serialized on its own strand), so they
// must not block: post work to the engine's queue instead.
//
// Thread rule: thread-safe. Stop() joins the threads and must not be called
// from one of them.
#pragma once

#include <memory>
#include <thread>
#include <vector>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace tandem::net {

class EventLoop {
 public:
  // Starts num_threads I/O threads (>= 1) right away.
  explicit EventLoop(int num_threads = 1);
  ~EventLoop();  // Stop()
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Stops the io_context and joins the threads. Pending handlers are dropped;
  // close servers and connections first for clean shutdown. Idempotent.
  void Stop();

  // True on one of this loop's I/O threads.
  bool InLoopThread() const;

  boost::asio::io_context& context() { return *context_; }

 private:
  void Run();

  std::unique_ptr<boost::asio::io_context> context_;
  struct WorkGuard;
  std::unique_ptr<WorkGuard> work_;
  std::vector<std::thread> threads_;
};

}  // namespace tandem::net
