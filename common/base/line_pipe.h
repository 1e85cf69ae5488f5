// Talking lines with a helper process: hex encoding of wire bytes, a non-blocking
// line reader for the helper's own stdin, and the helper process itself (fork + exec
// with its stdin/stdout as pipes, killable). tandem-profile's transfer peer, the
// two-process transport tests and the GPU transfer benches use it.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/base/check.h"

namespace tandem::line_pipe {

inline std::string Hex(const std::string& s) {
  static const char* k = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(k[c >> 4]);
    out.push_back(k[c & 15]);
  }
  return out;
}

inline std::string Unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Lines from stdin without blocking (std::cin would buffer lines out of poll's sight).
class StdinLines {
 public:
  // A complete line if one is available now; sets *eof when stdin closed.
  bool Next(std::string* line, bool* eof) {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return true;
      }
      pollfd pfd{0, POLLIN, 0};
      if (::poll(&pfd, 1, 0) <= 0) return false;
      char buf[65536];
      ssize_t n = read(0, buf, sizeof(buf));
      if (n <= 0) {
        *eof = true;
        return false;
      }
      buffer_.append(buf, n);
    }
  }

 private:
  std::string buffer_;
};

// A helper process running `path args...`, talking lines over pipes.
class PeerProcess {
 public:
  PeerProcess(const std::string& path, const std::vector<std::string>& args) {
    signal(SIGPIPE, SIG_IGN);  // a killed helper must not take this process with it
    int in[2], out[2];
    TANDEM_CHECK(pipe(in) == 0 && pipe(out) == 0);
    pid_ = fork();
    TANDEM_CHECK(pid_ >= 0);
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(path.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(path.c_str(), argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_fd_ = out[0];
  }
  ~PeerProcess() {
    if (pid_ > 0) {
      Command("exit");
      waitpid(pid_, nullptr, 0);
    }
    fclose(to_);
    close(from_fd_);
  }
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // A complete line if one is available within timeout_ms (0: don't wait).
  std::optional<std::string> TryReadLine(int timeout_ms) {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      pollfd pfd{from_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, timeout_ms) <= 0) return std::nullopt;
      char buf[65536];
      ssize_t n = read(from_fd_, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, n);
    }
  }
  std::string ReadLine(int timeout_ms = 20'000) { return TryReadLine(timeout_ms).value_or(""); }
  void Command(const std::string& c) {
    fprintf(to_, "%s\n", c.c_str());
    fflush(to_);
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  int from_fd_ = -1;
  std::string buffer_;
};

}  // namespace tandem::line_pipe
