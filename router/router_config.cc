#include "router/router_config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace tandem::router {
namespace {

Status CheckRange(const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return InvalidArgumentError(std::string("router config: ") + name + " = " +
                                std::to_string(value) + " is outside [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]");
  }
  return Status::Ok();
}

template <typename T>
void ReadScalar(const YAML::Node& root, const char* name, T* out) {
  if (root[name]) *out = root[name].as<T>();
}

}  // namespace

Status RouterConfig::Validate() const {
  if (listen_host.empty()) return InvalidArgumentError("router config: listen_host is empty");
  TANDEM_RETURN_IF_ERROR(CheckRange("num_io_threads", num_io_threads, 1, 256));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_body_bytes", max_body_bytes, 1024, int64_t{1} << 32));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_header_bytes", max_header_bytes, 512, 1 << 20));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_header_count", max_header_count, 4, 10'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_json_depth", max_json_depth, 4, 1024));
  TANDEM_RETURN_IF_ERROR(CheckRange("header_read_timeout_ms", header_read_timeout_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("body_read_timeout_ms", body_read_timeout_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("write_timeout_ms", write_timeout_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("request_timeout_ms", request_timeout_ms, 0, 86'400'000));
  TANDEM_RETURN_IF_ERROR(
      CheckRange("max_concurrent_requests", max_concurrent_requests, 1, 1'000'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_queued_requests", max_queued_requests, 0, 10'000'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_queue_wait_ms", max_queue_wait_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("retry_after_s", retry_after_s, 0, 3600));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_n", max_n, 1, 128));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_prompts", max_prompts, 1, 4096));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_messages", max_messages, 1, 100'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_stop_strings", max_stop_strings, 0, 256));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_stop_string_bytes", max_stop_string_bytes, 1, 4096));
  std::set<std::string> keys;
  for (size_t i = 0; i < api_keys.size(); ++i) {
    const ApiKeyEntry& entry = api_keys[i];
    const std::string where = "router config: api_keys[" + std::to_string(i) + "]";
    if (entry.key.size() < 8) return InvalidArgumentError(where + ".key is shorter than 8 bytes");
    if (entry.tenant.empty()) return InvalidArgumentError(where + ".tenant is empty");
    // The message names the index, never the key.
    if (!keys.insert(entry.key).second) return InvalidArgumentError(where + ".key is a duplicate");
  }
  return Status::Ok();
}

StatusOr<RouterConfig> ParseRouterConfigYaml(const std::string& yaml_text) {
  static const std::set<std::string> kKnown = {
      "listen_host", "listen_port", "num_io_threads", "max_body_bytes", "max_header_bytes",
      "max_header_count", "max_json_depth", "header_read_timeout_ms", "body_read_timeout_ms",
      "write_timeout_ms", "request_timeout_ms", "max_concurrent_requests", "max_queued_requests",
      "max_queue_wait_ms", "retry_after_s", "max_n", "max_prompts", "max_messages",
      "max_stop_strings", "max_stop_string_bytes", "served_model_name", "api_keys"};
  RouterConfig config;
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (root.IsNull()) return config;
    if (!root.IsMap()) return InvalidArgumentError("router config: top level must be a map");
    for (const auto& item : root) {
      const std::string key = item.first.as<std::string>();
      if (!kKnown.count(key)) return InvalidArgumentError("router config: unknown field '" + key + "'");
    }
    ReadScalar(root, "listen_host", &config.listen_host);
    ReadScalar(root, "listen_port", &config.listen_port);
    ReadScalar(root, "num_io_threads", &config.num_io_threads);
    ReadScalar(root, "max_body_bytes", &config.max_body_bytes);
    ReadScalar(root, "max_header_bytes", &config.max_header_bytes);
    ReadScalar(root, "max_header_count", &config.max_header_count);
    ReadScalar(root, "max_json_depth", &config.max_json_depth);
    ReadScalar(root, "header_read_timeout_ms", &config.header_read_timeout_ms);
    ReadScalar(root, "body_read_timeout_ms", &config.body_read_timeout_ms);
    ReadScalar(root, "write_timeout_ms", &config.write_timeout_ms);
    ReadScalar(root, "request_timeout_ms", &config.request_timeout_ms);
    ReadScalar(root, "max_concurrent_requests", &config.max_concurrent_requests);
    ReadScalar(root, "max_queued_requests", &config.max_queued_requests);
    ReadScalar(root, "max_queue_wait_ms", &config.max_queue_wait_ms);
    ReadScalar(root, "retry_after_s", &config.retry_after_s);
    ReadScalar(root, "max_n", &config.max_n);
    ReadScalar(root, "max_prompts", &config.max_prompts);
    ReadScalar(root, "max_messages", &config.max_messages);
    ReadScalar(root, "max_stop_strings", &config.max_stop_strings);
    ReadScalar(root, "max_stop_string_bytes", &config.max_stop_string_bytes);
    ReadScalar(root, "served_model_name", &config.served_model_name);
    if (const YAML::Node keys = root["api_keys"]) {
      if (!keys.IsSequence()) return InvalidArgumentError("router config: api_keys must be a list");
      for (const auto& k : keys) {
        if (!k.IsMap() || !k["key"] || !k["tenant"]) {
          return InvalidArgumentError("router config: each api_keys entry needs key and tenant");
        }
        config.api_keys.push_back({k["key"].as<std::string>(), k["tenant"].as<std::string>()});
      }
    }
  } catch (const YAML::Exception& e) {
    // yaml-cpp messages quote positions, not values, so no key text leaks here.
    return InvalidArgumentError(std::string("router config: ") + e.what());
  }
  TANDEM_RETURN_IF_ERROR(config.Validate());
  return config;
}

StatusOr<RouterConfig> LoadRouterConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("router config: cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1 << 20)) return InvalidArgumentError("router config: file over 1 MiB");
  StatusOr<RouterConfig> config = ParseRouterConfigYaml(text.str());
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

}  // namespace tandem::router
