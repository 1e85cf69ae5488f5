// RunCommand: runs a shell command line and returns its exit status and its
// stdout and stderr together, for tests that drive the project's command-line tools.
// Thread rule: free function.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tandem::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when it could not run or did not exit normally
  std::string output;  // stdout and stderr
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace tandem::testing
