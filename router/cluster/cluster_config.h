// ClusterConfig: the router's cluster side (node registry, placement, request
// dispatch). Lives under the `cluster:` key of router.yaml (deploy/router.yaml).
// Thread rule: a plain value; copy freely.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "common/base/status.h"

namespace tandem::router::cluster {

enum class ServingMode {
  kDisaggregated,  // prefill nodes compute prompts, KV goes to decode
  kColocated,      // every request is prefilled on its decode node (local path)
};

struct ClusterConfig {
  // "host:port" of the control RpcServer that nodes dial. Loopback by default.
  std::string control_address = "127.0.0.1:7000";
  // Shared secret of the cluster (>= 16 bytes); every node presents it. Never logged.
  // Prefer cluster_token_file in real deployments.
  std::string cluster_token;
  // File holding the cluster token (trailing whitespace stripped); used when
  // cluster_token is empty.
  std::string cluster_token_file;
  // Heartbeat period told to nodes at registration, ms. A node silent for
  // dead_after_missed_heartbeats periods is dead.
  int32_t heartbeat_interval_ms = 500;
  int32_t dead_after_missed_heartbeats = 3;
  // disaggregated | colocated.
  ServingMode mode = ServingMode::kDisaggregated;
  // Prompts of at most this many tokens prefill on their decode node (local
  // path); 0 = never (every prompt goes to a prefill node when one is alive).
  int32_t local_prefill_max_tokens = 0;
  // Deadline of one Reserve / Prefill / Cancel call to a node, ms.
  int32_t node_call_timeout_ms = 5000;
  // KV reservation lease asked of decode nodes, ms (0 = the node's default).
  int32_t reservation_lease_ms = 10000;
  // I/O threads of the control-plane event loop.
  int32_t num_control_threads = 1;

  // InvalidArgument naming the first bad field. Does not read the token file.
  Status Validate() const;
  // The token: cluster_token, else the first line of cluster_token_file.
  StatusOr<std::string> ResolveToken() const;
};

// Reads a `cluster:` YAML map (the keys above; mode as a string). Unknown keys
// are an error. A null node gives the defaults.
StatusOr<ClusterConfig> ParseClusterConfig(const YAML::Node& node);

const char* ServingModeName(ServingMode mode);

}  // namespace tandem::router::cluster
