#include "tools/validate/layout_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/config/config_binder.h"
#include "common/metrics/metric_names.h"
#include "tools/bench_serving/metrics_delta.h"
#include "tools/bench_serving/sse_client.h"

namespace tandem::tools {
namespace {

// A loopback port the kernel picked; the socket stays bound (SO_REUSEADDR set
// after the bind, as tests/e2e/process_group.h does) so no other bind to port 0
// gets it, while the child, binding with SO_REUSEADDR, can.
int ReservePort(std::vector<int>* holders) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const int one = 1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  holders->push_back(fd);
  return ntohs(addr.sin_port);
}

bool Ready(int port) {
  bench::Endpoint e;
  e.port = std::to_string(port);
  e.path = "/health/ready";
  e.timeout_s = 2;
  return bench::HttpGet(e).ok();
}

std::string Program(const std::string& binary_dir, const std::string& program) {
  if (program == "tandem-router") return binary_dir + "/router/tandem-router";
  if (program == "tandem-prefill") return binary_dir + "/prefill_node/tandem-prefill";
  return binary_dir + "/decode_node/tandem-decode";
}

}  // namespace

StatusOr<std::unique_ptr<LayoutCluster>> LayoutCluster::Start(const std::vector<LaunchGroup>& groups,
                                                              const LayoutClusterOptions& options) {
  std::unique_ptr<LayoutCluster> cluster(new LayoutCluster());
  cluster->log_dir_ = options.log_dir;
  cluster->http_port_ = ReservePort(&cluster->port_holders_);
  const int control_port = ReservePort(&cluster->port_holders_);
  if (cluster->http_port_ == 0 || control_port == 0) return UnavailableError("no free loopback port");
  const std::string control = "127.0.0.1:" + std::to_string(control_port);
  for (const LaunchGroup& g : groups) {
    std::vector<std::string> flags;
    for (const auto& [key, value] : g.settings) flags.insert(flags.end(), {config::ConfigBinder::FlagName(key), value});
    const std::string program = Program(options.binary_dir, g.program);
    const std::string config = options.source_dir + "/" + g.config_file;
    if (g.program == "tandem-router") {
      std::vector<std::string> argv = {program,          "--config",          config,
                                       "--model-dir",    options.model_dir,   "--listen-port",
                                       std::to_string(cluster->http_port_), "--control-address", control,
                                       "--cluster-token", options.cluster_token};
      argv.insert(argv.end(), flags.begin(), flags.end());
      TANDEM_RETURN_IF_ERROR(cluster->Spawn("router", argv, cluster->http_port_));
      continue;
    }
    for (int i = 0; i < g.count; ++i) {
      const std::string name = g.name_prefix + std::to_string(i);
      const int http = ReservePort(&cluster->port_holders_);
      std::vector<std::string> argv = {program, "--config", config, "--model-dir", options.model_dir,
                                       "--node-name", name, "--router-address", control, "--listen-address",
                                       "127.0.0.1:0", "--http-address", "127.0.0.1:" + std::to_string(http),
                                       "--cluster-token", options.cluster_token};
      argv.insert(argv.end(), flags.begin(), flags.end());
      TANDEM_RETURN_IF_ERROR(cluster->Spawn(name, argv, http));
    }
  }
  TANDEM_RETURN_IF_ERROR(cluster->WaitReady(options));
  return cluster;
}

Status LayoutCluster::Spawn(const std::string& name, const std::vector<std::string>& argv, int http_port) {
  const std::string log = log_dir_ + "/" + name + ".log";
  const pid_t pid = fork();
  if (pid < 0) return UnavailableError("fork failed for " + name);
  if (pid == 0) {
    // A tandem-validate that dies (a signal, a closed pipe) takes its cluster with it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror("execv");
    _exit(127);
  }
  processes_.push_back({name, pid, http_port});
  return Status::Ok();
}

Status LayoutCluster::WaitReady(const LayoutClusterOptions& options) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.ready_timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    bool all = true;
    for (Process& p : processes_) {
      int status = 0;
      if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
        p.pid = -1;
        return UnavailableError(p.name + " exited while starting:\n" + LogTail(p.name));
      }
      all = all && Ready(p.http_port);
    }
    if (all) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::string tails;
  for (const Process& p : processes_) {
    if (!Ready(p.http_port)) tails += p.name + " not ready:\n" + LogTail(p.name) + "\n";
  }
  return UnavailableError("the cluster was not ready in time:\n" + tails);
}

std::string LayoutCluster::LogTail(const std::string& name) const {
  std::ifstream in(log_dir_ + "/" + name + ".log");
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

void LayoutCluster::Stop() {
  for (const Process& p : processes_) {
    if (p.pid > 0) kill(p.pid, SIGTERM);
  }
  for (Process& p : processes_) {
    if (p.pid <= 0) continue;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (waitpid(p.pid, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    p.pid = -1;
  }
  for (int fd : port_holders_) close(fd);
  port_holders_.clear();
}

std::string LayoutCluster::NodeMetricsFlags() const {
  std::string flags;
  for (const Process& p : processes_) {
    if (p.name == "router") continue;
    flags += " --metrics-url " + p.name + "=http://127.0.0.1:" + std::to_string(p.http_port) + "/metrics";
  }
  return flags;
}

StatusOr<ClusterCpu> LayoutCluster::ScrapeCpu() const {
  ClusterCpu cpu;
  for (const Process& p : processes_) {
    bench::Endpoint endpoint;
    endpoint.port = std::to_string(p.http_port);
    endpoint.path = "/metrics";
    endpoint.timeout_s = 10;
    TANDEM_ASSIGN_OR_RETURN(std::string text, bench::HttpGet(endpoint));
    TANDEM_ASSIGN_OR_RETURN(bench::PromPage page, bench::ParsePrometheusText(text));
    bool found = false;
    for (const bench::PromSample& sample : page.samples) {
      if (sample.name == metrics::kProcessCpuSeconds || sample.name == metrics::kEngineCpuSeconds) {
        found |= sample.name == metrics::kProcessCpuSeconds;
        AddCpu(&cpu, p.name, sample.name, sample.value);
      }
    }
    if (!found) return UnavailableError(p.name + "'s /metrics has no " + metrics::kProcessCpuSeconds);
  }
  return cpu;
}

LayoutCluster::~LayoutCluster() { Stop(); }

}  // namespace tandem::tools
