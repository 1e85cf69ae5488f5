// LayoutCluster: one planned layout as real local processes — tandem-router and
// the nodes of each LaunchGroup (tools/plan/launch_config.h: the shipped config
// file plus the keys the plan assumed, as flags), on loopback with ports of their
// own, logs in a directory. What tandem-plan prints is what runs; only the
// addresses, node names, model directory and cluster token are added.
// Thread rule: one thread; the destructor stops every process it started.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "tools/plan/launch_config.h"
#include "tools/validate/validation.h"

namespace tandem::tools {

struct LayoutClusterOptions {
  std::string binary_dir;   // the build tree: router/tandem-router, {prefill,decode}_node/tandem-*
  std::string source_dir;   // the source tree: deploy/*.yaml
  std::string model_dir;    // the model every process loads
  std::string log_dir;      // <log_dir>/<process>.log
  std::string cluster_token = "validate-cluster-token-0123456789abcdef";
  int ready_timeout_ms = 60000;
};

class LayoutCluster {
 public:
  // Starts the router, then every node, and waits until all answer /health/ready.
  // Unavailable (with the log's tail) when one exits or is not ready in time.
  static StatusOr<std::unique_ptr<LayoutCluster>> Start(const std::vector<LaunchGroup>& groups,
                                                        const LayoutClusterOptions& options);
  ~LayoutCluster();
  LayoutCluster(const LayoutCluster&) = delete;
  LayoutCluster& operator=(const LayoutCluster&) = delete;

  // The router's OpenAI port on 127.0.0.1.
  int http_port() const { return http_port_; }
  // "--metrics-url NAME=URL" flags of every node's /metrics, for tandem-bench-serving.
  std::string NodeMetricsFlags() const;
  // Every process's CPU time so far, summed over the router and the nodes, from their
  // /metrics: process_cpu_seconds_total and the nodes' tandem_engine_cpu_seconds_total
  // (the prefill nodes' apart too).
  StatusOr<ClusterCpu> ScrapeCpu() const;
  // Nodes (not the router).
  int nodes() const { return static_cast<int>(processes_.size()) - 1; }
  // SIGTERM to every process, SIGKILL after 5 s.
  void Stop();

 private:
  struct Process {
    std::string name;
    pid_t pid = -1;
    int http_port = 0;
  };
  LayoutCluster() = default;
  Status Spawn(const std::string& name, const std::vector<std::string>& argv, int http_port);
  Status WaitReady(const LayoutClusterOptions& options);
  std::string LogTail(const std::string& name) const;

  std::string log_dir_;
  int http_port_ = 0;
  std::vector<Process> processes_;
  std::vector<int> port_holders_;  // sockets that keep the chosen ports from other binds
};

}  // namespace tandem::tools
