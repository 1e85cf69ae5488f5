#include "common/net/event_loop.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <exception>

#include "common/base/check.h"
#include "common/base/logging.h"

namespace tandem::net {

struct EventLoop::WorkGuard {
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard;
};

EventLoop::EventLoop(int num_threads) : context_(std::make_unique<boost::asio::io_context>(num_threads)) {
  TANDEM_CHECK(num_threads >= 1) << "EventLoop needs at least one thread";
  work_ = std::make_unique<WorkGuard>(WorkGuard{boost::asio::make_work_guard(*context_)});
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Run(); });
}

EventLoop::~EventLoop() { Stop(); }

void EventLoop::Run() {
  // Handlers do not throw by our rules; a library exception is logged and the loop goes on.
  while (true) {
    try {
      context_->run();
      return;
    } catch (const std::exception& e) {
      TANDEM_LOG_ERROR("I/O thread caught an exception: {}", e.what());
    } catch (...) {
      TANDEM_LOG_ERROR("I/O thread caught an unknown exception");
    }
  }
}

void EventLoop::Stop() {
  if (threads_.empty()) return;
  TANDEM_CHECK(!InLoopThread()) << "EventLoop::Stop() called from an I/O thread";
  work_.reset();
  context_->stop();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

bool EventLoop::InLoopThread() const { return context_->get_executor().running_in_this_thread(); }

}  // namespace tandem::net
