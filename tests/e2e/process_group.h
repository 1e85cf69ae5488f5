// Test helpers for multi-process e2e tests: start real binaries with their
// output in log files, send signals, stop them all at the end, pick free ports.
// Thread rule: one test thread.
#pragma once

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/check.h"

namespace tandem::e2e {

// A loopback port reserved for this test process: the kernel picks a free one (bind to
// 0) and the socket stays bound, never listening, until the process exits, with
// SO_REUSEADDR set. Every server here binds with SO_REUSEADDR, so the child given the port
// can bind and listen on it (again after a restart), while no other bind to port 0 — in
// this process or in a test running beside it — can be handed the same port. (Closing the
// socket right away let a parallel test's node take the port before ours bound it.)
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TANDEM_CHECK(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  TANDEM_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const int one = 1;  // after the bind: the kernel picked a port nobody holds
  TANDEM_CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0);
  socklen_t len = sizeof(addr);
  TANDEM_CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  return ntohs(addr.sin_port);  // fd stays open: the reservation
}

class ProcessGroup {
 public:
  struct Proc {
    std::string name;
    pid_t pid = -1;
    std::string log_path;
    int stdin_fd = -1;  // write end of the child's stdin; closed at stop (EOF tells it to quit)
  };

  explicit ProcessGroup(std::string log_dir) : log_dir_(std::move(log_dir)) {}
  ~ProcessGroup() { StopAll(); }

  // Starts `argv` (argv[0] is the binary path) with stdout+stderr to <log_dir>/<name>.log
  // and stdin from a pipe that stays open until the process is stopped.
  pid_t Start(const std::string& name, const std::vector<std::string>& argv) {
    std::string log = log_dir_ + "/" + name + ".log";
    int in[2];
    TANDEM_CHECK(pipe2(in, O_CLOEXEC) == 0) << "pipe failed";
    pid_t pid = fork();
    TANDEM_CHECK(pid >= 0) << "fork failed";
    if (pid == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(in[0], 0);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      std::perror("execv");
      _exit(127);
    }
    close(in[0]);
    procs_.push_back({name, pid, log, in[1]});
    return pid;
  }

  void Signal(const std::string& name, int sig) {
    for (auto& p : procs_) {
      if (p.name == name && p.pid > 0) kill(p.pid, sig);
    }
  }

  // Waits up to timeout for `name` to exit; returns its exit status or -1.
  int Wait(const std::string& name, std::chrono::milliseconds timeout) {
    for (auto& p : procs_) {
      if (p.name != name || p.pid <= 0) continue;
      auto end = std::chrono::steady_clock::now() + timeout;
      while (std::chrono::steady_clock::now() < end) {
        int status = 0;
        if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
          p.pid = -1;
          CloseStdin(p);
          return status;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    return -1;
  }

  void StopAll() {
    for (auto& p : procs_) {
      CloseStdin(p);
      if (p.pid > 0) kill(p.pid, SIGTERM);
    }
    for (auto& p : procs_) {
      if (p.pid <= 0) continue;
      if (Wait(p.name, std::chrono::milliseconds(3000)) == -1 && p.pid > 0) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
        p.pid = -1;
      }
    }
  }

  // The whole log of `name` so far.
  std::string FullLog(const std::string& name) const {
    for (const auto& p : procs_) {
      if (p.name != name) continue;
      std::ifstream in(p.log_path);
      std::stringstream s;
      s << in.rdbuf();
      return s.str();
    }
    return "";
  }

  // The log of `name`, for failure messages.
  std::string Log(const std::string& name) const {
    for (const auto& p : procs_) {
      if (p.name != name) continue;
      std::ifstream in(p.log_path);
      std::stringstream s;
      s << in.rdbuf();
      std::string text = s.str();
      return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
    }
    return "";
  }

 private:
  static void CloseStdin(Proc& p) {
    if (p.stdin_fd >= 0) close(p.stdin_fd);
    p.stdin_fd = -1;
  }

  std::string log_dir_;
  std::vector<Proc> procs_;
};

}  // namespace tandem::e2e
