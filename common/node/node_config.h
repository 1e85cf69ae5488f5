// NodeConfig: what a prefill or decode node process needs besides its engine:
// where it listens, which router it registers with, how it authenticates, the
// KV transport, the HTTP admin listener and the drain deadline.
// Thread rule: plain value type; Bind/Validate at startup.
#pragma once

#include <string>

#include "common/base/status.h"
#include "common/config/config_binder.h"
#include "common/engine/engine_config.h"
#include "common/net/rpc_config.h"

namespace tandem::node {

struct NodeConfig {
  // "prefill" (tandem-prefill), "decode" or "colocated" (tandem-decode; a colocated node registers
  // as NODE_ROLE_COLOCATED and the router prefills every request on it); empty: the binary's own.
  std::string role;
  // Control-plane listen address ("host:port"); port 0 picks a free port.
  std::string listen_address = "127.0.0.1:0";
  // Address the router and peers dial back; empty = the bound listen address.
  std::string advertise_address;
  // Router control address ("host:port"). Empty: run without a router (tests).
  std::string router_address;
  // Shared cluster secret (>= 16 bytes), the same on router and every node. Never logged.
  // Prefer cluster_token_file in deployments (a command line is visible to every user).
  std::string cluster_token;
  // File holding the cluster token (trailing whitespace stripped), read by
  // ResolveClusterToken when cluster_token is empty: a secret store's mount,
  // systemd's credentials directory (%d/cluster-token), a Kubernetes Secret volume.
  std::string cluster_token_file;
  // Name for logs and the router's registry ("decode-0").
  std::string node_name = "node";
  // Heartbeat period until the router's RegisterReply says otherwise, ms.
  int heartbeat_interval_ms = 1000;
  // Delay between attempts to (re)connect and re-register with the router, ms.
  int reconnect_interval_ms = 500;
  // HTTP listener for /metrics, /health/live, /health/ready ("host:port"); empty disables.
  std::string http_address = "127.0.0.1:0";
  // KV transport backend: "ucx" (host memory over tcp/shm/verbs; needs a UCX
  // build), "cuda_ipc" (GPU to GPU on one host), "nccl" (GPU to GPU across
  // processes and hosts), or "local" (same process only, tests).
  std::string transport = "ucx";
  // Where KV lands and leaves. "auto": straight between the engines' KV pools
  // when the transport reaches their memory (cuda_ipc/nccl with CUDA pools; any
  // transport with CPU pools), else through the host arenas below. "host":
  // always through the host arenas (bounds KV in flight by transfer_blocks).
  std::string kv_staging = "auto";
  // UCX transport list (UCX_TLS syntax, e.g. "tcp", "shm", "rc,sm"); empty = UCX's choice.
  std::string ucx_transports = "tcp";
  // Host blocks of the registered KV arena when KV is staged through host memory:
  // decode's landing buffer / prefill's staging buffer (KvLayout blocks). Bounds
  // the blocks in flight at once; a prompt needing more is refused.
  int transfer_blocks = 256;
  // Keep host landing blocks of a failed transfer out of reuse this long (late
  // one-sided writes), ms. Device blocks: the scheduler's reservation_quarantine_ms.
  int late_write_grace_ms = 2000;
  // Default reservation lease when the router asks for 0, ms.
  int lease_ms = 10000;
  // Prefill: jobs accepted but not finished, at most; more get ResourceExhausted.
  int max_pending_jobs = 256;
  // SIGTERM: exit when in-flight work is done, or after this long, ms.
  int drain_timeout_ms = 30000;
  // TLS on every control connection of the node (YAML map `control_tls:`, flags
  // --control-tls-*). It is mutual: cert_file serves this node's RpcServer (prefill
  // nodes dial decode nodes) and is presented as the client certificate on the
  // router link and peer links; ca_file verifies the other side in both
  // directions; server_name, when set, is the name the router's and peers'
  // certificates must carry. cert_file needs the advertised host in
  // subjectAltName and, if it has extendedKeyUsage, both serverAuth and clientAuth.
  net::TlsConfig control_tls;
  // The model engine.
  engine::EngineConfig engine;

  void Bind(config::ConfigBinder& b);
  // InvalidArgument naming the first bad field. Needs the token itself: call
  // ResolveClusterToken first when it comes from cluster_token_file.
  Status Validate() const;
  // When cluster_token is empty and cluster_token_file is set, reads the file
  // into cluster_token (cluster_token wins when both are set). InvalidArgument
  // when neither is set or the file is unreadable or too short.
  Status ResolveClusterToken();

  // The RPC settings derived from these fields (token, peer name, control_tls).
  net::RpcServerConfig ServerConfig() const;
  net::RpcClientConfig ClientConfig() const;
};

}  // namespace tandem::node
