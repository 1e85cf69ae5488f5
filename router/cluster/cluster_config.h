// ClusterConfig: the router's cluster side (node registry, placement, request
// dispatch). Its keys sit at the top level of router.yaml (deploy/router.yaml)
// next to RouterConfig's, with the names the nodes use for the same things
// (cluster_token, heartbeat_interval_ms, control_tls); each is also a flag.
// Thread rule: a plain value; copy freely.
#pragma once

#include <cstdint>
#include <string>

#include "common/base/status.h"
#include "common/config/config_binder.h"
#include "common/net/rpc_config.h"

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
  // Heartbeat period told to nodes at registration, ms (their load reports
  // for placement come this often).
  int32_t heartbeat_interval_ms = 500;
  // A node from which nothing arrived (heartbeat, Tokens, keepalive) for this
  // long is dead and its requests move; a closed connection is dead at once.
  // Sized so that a busy node (a long engine step, a loaded CPU, sanitizers)
  // is never taken for a dead one (vLLM: 30 s lease; SGLang: 5 s x 2). At
  // least 2 x heartbeat_interval_ms. Lower it only where a stopped node must be
  // noticed quickly (tests that SIGSTOP one), ms.
  int32_t node_dead_after_ms = 10000;
  // disaggregated | colocated.
  ServingMode mode = ServingMode::kDisaggregated;
  // Prompts of at most this many tokens prefill on their decode node (local
  // path); 0 = never (every prompt goes to a prefill node when one is alive).
  int32_t local_prefill_max_tokens = 0;
  // Deadline of one Reserve / Prefill / Cancel call to a node, ms.
  int32_t node_call_timeout_ms = 5000;
  // KV reservation lease asked of decode nodes, ms (0 = the node's default).
  int32_t reservation_lease_ms = 10000;
  // How long a request keeps being placed again (with backoff) when decode
  // nodes refuse it for lack of room (no batch slot, KV blocks or queue
  // space), ms; after that it ends with 429. 0 = answer 429 at once.
  int32_t no_room_retry_ms = 30000;
  // A request's first dispatch sends its PrefillRequest beside the Reserve: the prefill
  // node computes the prompt while the decode node reserves (it waits for the decode
  // engine's step boundary), and sends the KV once a PrefillTarget brings the reservation.
  // false: the PrefillRequest goes after the reservation, with it.
  bool prefill_with_reserve = true;
  // I/O threads of the control-plane event loop.
  int32_t num_control_threads = 1;
  // TLS on the control plane (YAML map `control_tls:`, flags --control-tls-*). It
  // is mutual: the router serves cert_file, whose subjectAltName must carry the host
  // nodes dial (the host of control_address as they see it), and accepts only
  // nodes whose client certificate ca_file verifies. Off: plaintext, guarded by
  // the cluster token only. server_name is not bound: the router dials nobody.
  net::TlsConfig control_tls;

  // Binds every field above to `b` (YAML key = field name; mode as a name).
  void Bind(config::ConfigBinder& b);
  // InvalidArgument naming the first bad field. Does not read the token file.
  Status Validate() const;
  // The token: cluster_token, else cluster_token_file's contents (trailing
  // whitespace stripped; net::ReadClusterTokenFile).
  StatusOr<std::string> ResolveToken() const;
};

const char* ServingModeName(ServingMode mode);

}  // namespace tandem::router::cluster
