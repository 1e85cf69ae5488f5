// LogCapture: while alive, keeps a copy of every message the process logs through
// the default logger (TANDEM_LOG_*), so a test can check what was logged.
// Thread rule: create and destroy it while no other thread logs (before the code
// under test starts its threads, after it stopped them); Count/Lines are
// thread-safe.
#pragma once

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::testing {

class LogCapture {
 public:
  explicit LogCapture(size_t max_lines = 4096) : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(max_lines)) {
    sink_->set_pattern("%l %v");
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Every captured line ("<level> <message>"), oldest first.
  std::vector<std::string> Lines() const { return sink_->last_formatted(); }
  // Captured lines that contain every one of `needles`.
  int Count(std::initializer_list<std::string_view> needles) const {
    int n = 0;
    for (const std::string& line : Lines()) {
      n += std::all_of(needles.begin(), needles.end(),
                       [&](std::string_view needle) { return line.find(needle) != std::string::npos; });
    }
    return n;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

}  // namespace tandem::testing
