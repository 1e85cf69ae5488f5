// LocalCluster: the real tandem-router, tandem-prefill and tandem-decode as
// separate processes on loopback (KV over UCX tcp), for e2e tests. Builds the
// command lines the way tools/demo.sh does, waits for readiness, and reads
// /metrics of any process. Also writes the built-in tiny model.
// Thread rule: one test thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/process_group.h"
#include "tests/router/test_http_client.h"

namespace tandem::e2e {

inline std::string BinaryDir() {
  const char* dir = std::getenv("TANDEM_BINARY_DIR");
  return dir ? dir : ".";
}
inline std::string SourceDir() {
  const char* dir = std::getenv("TANDEM_SOURCE_DIR");
  return dir ? dir : ".";
}

// Writes the built-in tiny model (random weights, byte-level tokenizer) to `dir`.
inline bool MakeTinyModel(const std::string& dir) {
  std::string make = BinaryDir() + "/tools/make_model/tandem-make-model --preset tiny -f -o " + dir + " > /dev/null";
  return std::system(make.c_str()) == 0;
}

struct LocalClusterOptions {
  // Shared cluster secret of the router and every node.
  std::string cluster_token = "e2e-cluster-token-0123456789abcdef";
  // Extra router flags (e.g. --config FILE, --control-tls-*).
  std::vector<std::string> router_args;
  // Extra flags for every node started by Start() (e.g. --control-tls-*).
  std::vector<std::string> node_args;
};

class LocalCluster {
 public:
  // Logs go to `root`; the model must be in `root`/tiny (MakeTinyModel).
  explicit LocalCluster(std::string root, LocalClusterOptions options = {})
      : root_(root), options_(std::move(options)), procs_(root), http_port_(FreePort()), control_port_(FreePort()) {}

  // Router, then a decode node "decode" and a prefill node "prefill".
  void Start() {
    StartRouter();
    StartNode("decode", "decode", options_.node_args);
    StartNode("prefill", "prefill", options_.node_args);
  }

  void StartRouter() {
    std::vector<std::string> argv = {BinaryDir() + "/router/tandem-router",
                                     "--model-dir",
                                     model_dir(),
                                     "--served-model-name",
                                     "tiny",
                                     "--listen-port",
                                     std::to_string(http_port_),
                                     "--control-address",
                                     "127.0.0.1:" + std::to_string(control_port_),
                                     "--cluster-token",
                                     options_.cluster_token,
                                     "--heartbeat-interval-ms",
                                     "200"};
    argv.insert(argv.end(), options_.router_args.begin(), options_.router_args.end());
    procs_.Start("router", argv);
  }

  // Starts a node process named `name` (its log is <root>/<name>.log) with the
  // deploy/<role>.yaml config, then `extra` flags (a `--cluster-token` there replaces the
  // cluster's). `expect_ready`: WaitReady waits for it.
  void StartNode(const std::string& name, const std::string& role, const std::vector<std::string>& extra,
                 bool expect_ready = true) {
    int http = FreePort();
    http_ports_[name] = http;
    if (expect_ready) ready_names_.push_back(name);
    std::vector<std::string> argv = {BinaryDir() + "/" + role + "_node/tandem-" + role,
                                     "--config",
                                     SourceDir() + "/deploy/" + role + ".yaml",
                                     "--model-dir",
                                     model_dir(),
                                     "--model-name",
                                     "tiny",
                                     "--node-name",
                                     name,
                                     "--router-address",
                                     "127.0.0.1:" + std::to_string(control_port_),
                                     "--listen-address",
                                     "127.0.0.1:0",
                                     "--http-address",
                                     "127.0.0.1:" + std::to_string(http)};
    if (std::find(extra.begin(), extra.end(), "--cluster-token") == extra.end()) {
      argv.insert(argv.end(), {"--cluster-token", options_.cluster_token});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    procs_.Start(name, argv);
  }

  // Ready = the router and every node started with expect_ready answer /health/ready.
  bool WaitReady(std::chrono::seconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      bool ok = Get(http_port_, "/health/ready").status == 200;
      for (const std::string& name : ready_names_) ok = ok && Get(http_ports_[name], "/health/ready").status == 200;
      if (ok) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // GET on loopback; status 0 when nothing answered.
  static router::testing::HttpResult Get(int port, const std::string& target) {
    try {
      return router::testing::Send(static_cast<uint16_t>(port), "GET", target);
    } catch (const std::exception&) {
      return {};
    }
  }

  // Sum of the samples of `metric` on `name`'s /metrics ("router" or a node name)
  // whose labels contain `label` (e.g. role="decode"; empty = every sample).
  double Metric(const std::string& name, const std::string& metric, const std::string& label = "") {
    return MetricIn(MetricsPage(name), metric, label);
  }
  // The same sum over a /metrics page already fetched.
  static double MetricIn(const std::string& text, const std::string& metric, const std::string& label = "") {
    std::regex line("^" + metric + R"((\{[^}]*\})? ([0-9.eE+-]+)$)");
    double sum = 0;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (!std::regex_match(l, m, line)) continue;
      if (!label.empty() && m[1].str().find(label) == std::string::npos) continue;
      sum += std::stod(m[2]);
    }
    return sum;
  }

  // What `nodes` still hold once `timeout` has passed: requests, referenced KV
  // blocks, reservations and landing/staging blocks ("" when all are 0).
  std::string KvDirt(const std::vector<std::string>& nodes, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    std::string dirt;
    do {
      dirt.clear();
      for (const std::string& node : nodes) {
        for (const char* gauge :
             {"tandem_num_requests_running", "tandem_num_requests_waiting", "tandem_kv_blocks_referenced",
              "tandem_kv_reservations_active", "tandem_kv_transfer_blocks_in_use"}) {
          const double v = Metric(node, gauge);
          if (v != 0) dirt += node + " " + gauge + " = " + std::to_string(v) + "; ";
        }
      }
      if (dirt.empty()) return dirt;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (std::chrono::steady_clock::now() < end);
    return dirt;
  }

  // The /metrics text of `name` ("router" or a node name); empty when nothing answered.
  std::string MetricsPage(const std::string& name) {
    return Get(name == "router" ? http_port_ : http_ports_[name], "/metrics").body;
  }

  // The tail of every process's log, for failure messages.
  std::string Logs() const {
    std::string all = procs_.Log("router").empty() ? "" : "router:\n" + procs_.Log("router");
    for (const auto& [name, port] : http_ports_) all += "\n" + name + ":\n" + procs_.Log(name);
    return all;
  }

  std::string model_dir() const { return root_ + "/tiny"; }
  uint16_t http_port() const { return static_cast<uint16_t>(http_port_); }
  int node_http_port(const std::string& name) { return http_ports_[name]; }
  ProcessGroup& procs() { return procs_; }

 private:
  std::string root_;
  LocalClusterOptions options_;
  ProcessGroup procs_;
  int http_port_, control_port_;
  std::map<std::string, int> http_ports_;  // node name -> admin HTTP port
  std::vector<std::string> ready_names_;
};

}  // namespace tandem::e2e
