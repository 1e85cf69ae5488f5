// RouterConfig: every knob of the HTTP front door, with defaults that are safe
// on a shared host (loopback only, bounded bodies, headers, queues and timeouts).
//
// Bind() gives every field to a ConfigBinder: a YAML key of tandem-router's
// --config file and a flag (router_options.h). Thread rule: a plain value; copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/config/config_binder.h"

namespace tandem::router {

// One API key, the tenant it belongs to, and the priority of its requests. The
// tenant id is forwarded to the engine, which derives the prefix-cache salt from
// it. Priorities are the API's integers (lower = more urgent; priority_class.h),
// written as text because config records hold strings; empty = not set.
struct ApiKeyEntry {
  std::string key;     // the bearer token; never logged
  std::string tenant;  // tenant id; non-empty
  // Optional: the priority of this key's requests that do not set `priority`
  // (empty: 0, interactive). A request's own `priority` wins, within the cap.
  std::string priority = {};
  // Optional: the most urgent priority this key's requests get; a lower value
  // (asked for, or the key's default) is raised to it. Empty: no cap. E.g. 1
  // keeps a batch tenant's requests in the batch class whatever they ask for.
  std::string min_priority = {};
};

// An ApiKeyEntry priority member: nullopt when empty, else an integer in
// [kMinPriority, kMaxPriority]; InvalidArgument naming `where` otherwise.
StatusOr<std::optional<int32_t>> ParseKeyPriority(const std::string& text, const std::string& where);

struct RouterConfig {
  // Address to listen on. Loopback by default; set "0.0.0.0" only deliberately.
  std::string listen_host = "127.0.0.1";
  // TCP port, 0 to 65535; 0 picks a free port (tests read it back from HttpServer::port()).
  int32_t listen_port = 8000;
  // Threads running the Asio io_context (connections, parsing, SSE writes).
  int32_t num_io_threads = 2;

  // Largest request body in bytes; more gets 413.
  int64_t max_body_bytes = 8 << 20;
  // Largest request header block (request line + all fields) in bytes; more gets 431.
  int32_t max_header_bytes = 16 << 10;
  // Most header fields per request; more gets 431.
  int32_t max_header_count = 100;
  // Deepest JSON nesting accepted in a body ('[' / '{' levels); deeper gets 400.
  int32_t max_json_depth = 32;

  // Time allowed to receive a complete request header, including the idle time
  // of a keep-alive connection before its next request. Cuts slow-loris clients.
  int32_t header_read_timeout_ms = 10'000;
  // Time allowed to receive the request body once the header is in.
  int32_t body_read_timeout_ms = 30'000;
  // Time allowed for one write (a response, or one SSE chunk) to drain.
  int32_t write_timeout_ms = 30'000;
  // End-to-end deadline of one generation, passed to the engine; the router
  // ends the request with an error when it passes. 0 = no deadline.
  int32_t request_timeout_ms = 600'000;

  // Inference requests running at once (an HTTP request counts once, whatever its n).
  int32_t max_concurrent_requests = 256;
  // Inference requests waiting for a running slot; beyond this, 429.
  int32_t max_queued_requests = 1024;
  // How long a request may wait in the queue before it is answered 429.
  int32_t max_queue_wait_ms = 30'000;
  // Value of the Retry-After header (seconds) on 429 and 503.
  int32_t retry_after_s = 1;
  // On SIGTERM the router drains: readiness turns 503, new requests get 503, and
  // the running ones may take this long to finish before it stops (0: stop at
  // once, cancelling them). A second SIGTERM or SIGINT stops it at once.
  int32_t drain_timeout_ms = 30'000;

  // Request shape limits (each violation is a 400 naming the parameter).
  int32_t max_n = 16;                   // most choices per request (`n`)
  int32_t max_prompts = 64;             // most prompts in one /v1/completions batch
  int32_t max_messages = 1024;          // most chat messages
  int32_t max_stop_strings = 16;        // most entries of `stop`
  int32_t max_stop_string_bytes = 256;  // longest single stop string

  // Model name served on the API. Empty = the model id given to HttpServer.
  std::string served_model_name;
  // How chat output is parsed into tool_calls for tool_choice "auto": "auto" picks
  // the format from the model's chat template (`<tool_call>`: hermes;
  // `<|python_tag|>` or a "parameters" key: llama3_json), or "hermes",
  // "llama3_json", "none" (then "auto" tool choice is a 400, as in vLLM without
  // --tool-call-parser). required / named choices need no parser.
  std::string tool_call_parser = "auto";

  // API keys. Empty = open access (every request uses tenant "default"); the
  // router logs a warning at startup when open.
  std::vector<ApiKeyEntry> api_keys;

  // Admin key (>= 16 bytes, unlike every API key): `Authorization: Bearer <it>` opens
  // the operator endpoints (/admin/*, admin_endpoints.h). Empty and no admin_key_file:
  // the admin API is off (403). Never logged; prefer admin_key_file.
  std::string admin_key;
  // File holding the admin key (trailing whitespace stripped), read at startup when
  // admin_key is empty (RouterOptions::ResolveAdminKey).
  std::string admin_key_file;

  // Binds every field above to `b` (YAML key = field name; api_keys as a list
  // of {key, tenant[, priority, min_priority]} maps, or `--api-keys
  // key=K,tenant=T[,priority=P,min_priority=M]` flags).
  void Bind(config::ConfigBinder& b);
  // Returns InvalidArgument naming the first bad field.
  Status Validate() const;
};

}  // namespace tandem::router
