#include "router/router_config.h"

#include <charconv>
#include <set>

#include "router/priority_class.h"

namespace tandem::router {
namespace {

Status CheckRange(const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return InvalidArgumentError(std::string("router config: ") + name + " = " + std::to_string(value) +
                                " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::optional<int32_t>> ParseKeyPriority(const std::string& text, const std::string& where) {
  if (text.empty()) return std::optional<int32_t>();
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < kMinPriority || value > kMaxPriority) {
    return InvalidArgumentError(where + " = '" + text + "' is not an integer in [" + std::to_string(kMinPriority) +
                                ", " + std::to_string(kMaxPriority) + "]");
  }
  return std::optional<int32_t>(static_cast<int32_t>(value));
}

void RouterConfig::Bind(config::ConfigBinder& b) {
  b.Field("listen_host", listen_host, "HTTP address to listen on (0.0.0.0 only deliberately)");
  b.Field("listen_port", listen_port, "HTTP port (0 = any free port)");
  b.Field("num_io_threads", num_io_threads, "HTTP I/O threads");
  b.Field("max_body_bytes", max_body_bytes, "largest request body, bytes (more: 413)");
  b.Field("max_header_bytes", max_header_bytes, "largest request header block, bytes (more: 431)");
  b.Field("max_header_count", max_header_count, "most header fields per request (more: 431)");
  b.Field("max_json_depth", max_json_depth, "deepest JSON nesting in a body (deeper: 400)");
  b.Field("header_read_timeout_ms", header_read_timeout_ms,
          "time to receive a request header, incl. keep-alive idle (ms)");
  b.Field("body_read_timeout_ms", body_read_timeout_ms, "time to receive a body once the header is in (ms)");
  b.Field("write_timeout_ms", write_timeout_ms, "time for one write (a response, one SSE chunk) to drain (ms)");
  b.Field("request_timeout_ms", request_timeout_ms, "end-to-end deadline of one generation (ms, 0 = none)");
  b.Field("max_concurrent_requests", max_concurrent_requests, "inference requests running at once");
  b.Field("max_queued_requests", max_queued_requests, "inference requests waiting for a slot (more: 429)");
  b.Field("max_queue_wait_ms", max_queue_wait_ms, "longest wait in the queue before 429 (ms)");
  b.Field("retry_after_s", retry_after_s, "Retry-After on 429 and 503 (s)");
  b.Field("drain_timeout_ms", drain_timeout_ms,
          "on SIGTERM, how long running requests may take to finish (ms, 0 = none)");
  b.Field("max_n", max_n, "most choices per request (n)");
  b.Field("max_prompts", max_prompts, "most prompts in one /v1/completions batch");
  b.Field("max_messages", max_messages, "most chat messages per request");
  b.Field("max_stop_strings", max_stop_strings, "most stop strings per request");
  b.Field("max_stop_string_bytes", max_stop_string_bytes, "longest stop string, bytes");
  b.Field("served_model_name", served_model_name, "model name on the API (empty: the model directory's name)");
  b.Field("tool_call_parser", tool_call_parser,
          "tool-call format of the model's output for tool_choice auto: auto (from the chat template), hermes, "
          "llama3_json or none");
  b.Records("api_keys", api_keys, {{"key", &ApiKeyEntry::key}, {"tenant", &ApiKeyEntry::tenant}},
            "API keys and their tenants, key=K,tenant=T per key, optionally priority=P (the default of requests "
            "without one) and min_priority=M (the most urgent they get) (none: open access)",
            {{"priority", &ApiKeyEntry::priority}, {"min_priority", &ApiKeyEntry::min_priority}});
  b.Secret("admin_key", admin_key, "admin key for /admin/* (>= 16 bytes; empty: admin API off); prefer admin_key_file");
  b.Field("admin_key_file", admin_key_file, "file holding the admin key, read when admin_key is empty");
}

Status RouterConfig::Validate() const {
  if (listen_host.empty()) return InvalidArgumentError("router config: listen_host is empty");
  if (tool_call_parser != "auto" && tool_call_parser != "hermes" && tool_call_parser != "llama3_json" &&
      tool_call_parser != "none") {
    return InvalidArgumentError("router config: tool_call_parser must be auto, hermes, llama3_json or none");
  }
  TANDEM_RETURN_IF_ERROR(CheckRange("listen_port", listen_port, 0, 65535));
  TANDEM_RETURN_IF_ERROR(CheckRange("num_io_threads", num_io_threads, 1, 256));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_body_bytes", max_body_bytes, 1024, int64_t{1} << 32));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_header_bytes", max_header_bytes, 512, 1 << 20));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_header_count", max_header_count, 4, 10'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_json_depth", max_json_depth, 4, 1024));
  TANDEM_RETURN_IF_ERROR(CheckRange("header_read_timeout_ms", header_read_timeout_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("body_read_timeout_ms", body_read_timeout_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("write_timeout_ms", write_timeout_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("request_timeout_ms", request_timeout_ms, 0, 86'400'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_concurrent_requests", max_concurrent_requests, 1, 1'000'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_queued_requests", max_queued_requests, 0, 10'000'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("max_queue_wait_ms", max_queue_wait_ms, 1, 3'600'000));
  TANDEM_RETURN_IF_ERROR(CheckRange("retry_after_s", retry_after_s, 0, 3600));
  TANDEM_RETURN_IF_ERROR(CheckRange("drain_timeout_ms", drain_timeout_ms, 0, 3'600'000));
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
    TANDEM_RETURN_IF_ERROR(ParseKeyPriority(entry.priority, where + ".priority").status());
    TANDEM_RETURN_IF_ERROR(ParseKeyPriority(entry.min_priority, where + ".min_priority").status());
  }
  if (!admin_key.empty()) {
    if (admin_key.size() < 16) return InvalidArgumentError("router config: admin_key is shorter than 16 bytes");
    if (keys.count(admin_key) > 0) return InvalidArgumentError("router config: admin_key equals an API key");
  }
  return Status::Ok();
}

}  // namespace tandem::router
