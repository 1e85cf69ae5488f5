#include "router/cluster/cluster_config.h"

#include <fstream>
#include <sstream>

namespace tandem::router::cluster {

const char* ServingModeName(ServingMode mode) {
  return mode == ServingMode::kColocated ? "colocated" : "disaggregated";
}

Status ControlTlsConfig::Validate() const {
  if (!enabled) {
    if (!cert_file.empty() || !key_file.empty() || !ca_file.empty()) {
      return InvalidArgumentError(
          "cluster.tls: cert_file/key_file/ca_file are set but cluster.tls.enabled is false "
          "(set it to true, or remove the files)");
    }
    return Status::Ok();
  }
  if (cert_file.empty()) return InvalidArgumentError("cluster.tls.enabled needs cluster.tls.cert_file");
  if (key_file.empty()) return InvalidArgumentError("cluster.tls.cert_file is set but cluster.tls.key_file is empty");
  if (ca_file.empty()) {
    return InvalidArgumentError("cluster.tls.enabled needs cluster.tls.ca_file (verifies the nodes' certificates)");
  }
  return Status::Ok();
}

net::TlsConfig ControlTlsConfig::ForServer() const {
  net::TlsConfig t;
  t.enabled = enabled;
  t.cert_file = cert_file;
  t.key_file = key_file;
  t.ca_file = ca_file;  // set: every node must present a certificate signed by it
  return t;
}

Status ClusterConfig::Validate() const {
  if (control_address.empty() || control_address.find(':') == std::string::npos) {
    return InvalidArgumentError("cluster.control_address must be host:port");
  }
  if (!cluster_token.empty() && cluster_token.size() < 16) {
    return InvalidArgumentError("cluster.cluster_token must be at least 16 bytes");
  }
  if (cluster_token.empty() && cluster_token_file.empty()) {
    return InvalidArgumentError("cluster.cluster_token or cluster.cluster_token_file is required");
  }
  if (heartbeat_interval_ms < 10 || heartbeat_interval_ms > 60000) {
    return InvalidArgumentError("cluster.heartbeat_interval_ms must be in [10, 60000]");
  }
  if (node_dead_after_ms < 2 * heartbeat_interval_ms || node_dead_after_ms > 600000) {
    return InvalidArgumentError("cluster.node_dead_after_ms must be in [2 x heartbeat_interval_ms, 600000]");
  }
  if (local_prefill_max_tokens < 0) {
    return InvalidArgumentError("cluster.local_prefill_max_tokens must be >= 0");
  }
  if (node_call_timeout_ms < 1) return InvalidArgumentError("cluster.node_call_timeout_ms must be >= 1");
  if (reservation_lease_ms < 0) return InvalidArgumentError("cluster.reservation_lease_ms must be >= 0");
  if (no_room_retry_ms < 0) return InvalidArgumentError("cluster.no_room_retry_ms must be >= 0");
  if (num_control_threads < 1 || num_control_threads > 64) {
    return InvalidArgumentError("cluster.num_control_threads must be in [1, 64]");
  }
  return tls.Validate();
}

StatusOr<std::string> ClusterConfig::ResolveToken() const {
  std::string token = cluster_token;
  if (token.empty()) {
    std::ifstream in(cluster_token_file, std::ios::binary);
    if (!in) return InvalidArgumentError("cannot read cluster_token_file " + cluster_token_file);
    char buf[4097];
    in.read(buf, sizeof(buf));
    token.assign(buf, static_cast<size_t>(in.gcount()));
    if (token.size() > 4096) return InvalidArgumentError("cluster_token_file is too large");
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                              token.back() == '\t')) {
      token.pop_back();
    }
  }
  if (token.size() < 16) return InvalidArgumentError("cluster token must be at least 16 bytes");
  return token;
}

namespace {

template <typename T>
Status Read(const YAML::Node& value, const std::string& key, T* out) {
  try {
    *out = value.as<T>();
    return Status::Ok();
  } catch (const std::exception&) {
    return InvalidArgumentError("cluster." + key + " has the wrong type");
  }
}

Status ParseTls(const YAML::Node& node, ControlTlsConfig* tls) {
  if (!node || node.IsNull()) return Status::Ok();
  if (!node.IsMap()) return InvalidArgumentError("cluster.tls must be a map");
  for (const auto& kv : node) {
    std::string key;
    try {
      key = kv.first.as<std::string>();
    } catch (const std::exception&) {
      return InvalidArgumentError("cluster.tls has a non-string key");
    }
    const YAML::Node& v = kv.second;
    const std::string name = "tls." + key;
    if (key == "enabled") {
      TANDEM_RETURN_IF_ERROR(Read(v, name, &tls->enabled));
    } else if (key == "cert_file") {
      TANDEM_RETURN_IF_ERROR(Read(v, name, &tls->cert_file));
    } else if (key == "key_file") {
      TANDEM_RETURN_IF_ERROR(Read(v, name, &tls->key_file));
    } else if (key == "ca_file") {
      TANDEM_RETURN_IF_ERROR(Read(v, name, &tls->ca_file));
    } else {
      return InvalidArgumentError("unknown key cluster.tls." + key);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ClusterConfig> ParseClusterConfig(const YAML::Node& node) {
  ClusterConfig c;
  if (!node || node.IsNull()) return c;
  if (!node.IsMap()) return InvalidArgumentError("cluster must be a map");
  for (const auto& kv : node) {
    std::string key;
    try {
      key = kv.first.as<std::string>();
    } catch (const std::exception&) {
      return InvalidArgumentError("cluster has a non-string key");
    }
    const YAML::Node& v = kv.second;
    if (key == "control_address") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.control_address));
    } else if (key == "cluster_token") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.cluster_token));
    } else if (key == "cluster_token_file") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.cluster_token_file));
    } else if (key == "heartbeat_interval_ms") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.heartbeat_interval_ms));
    } else if (key == "node_dead_after_ms") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.node_dead_after_ms));
    } else if (key == "local_prefill_max_tokens") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.local_prefill_max_tokens));
    } else if (key == "node_call_timeout_ms") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.node_call_timeout_ms));
    } else if (key == "reservation_lease_ms") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.reservation_lease_ms));
    } else if (key == "no_room_retry_ms") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.no_room_retry_ms));
    } else if (key == "num_control_threads") {
      TANDEM_RETURN_IF_ERROR(Read(v, key, &c.num_control_threads));
    } else if (key == "tls") {
      TANDEM_RETURN_IF_ERROR(ParseTls(v, &c.tls));
    } else if (key == "mode") {
      std::string mode;
      TANDEM_RETURN_IF_ERROR(Read(v, key, &mode));
      if (mode == "disaggregated") {
        c.mode = ServingMode::kDisaggregated;
      } else if (mode == "colocated") {
        c.mode = ServingMode::kColocated;
      } else {
        return InvalidArgumentError("cluster.mode must be disaggregated or colocated");
      }
    } else {
      return InvalidArgumentError("unknown key cluster." + key);
    }
  }
  return c;
}

}  // namespace tandem::router::cluster
