// RouterContext: what every connection of the HTTP server shares.
// Thread rule: immutable after HttpServer::Start() except AdmissionController,
// which is thread-safe, and `draining`; the callbacks must be thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "router/admin_auth.h"
#include "router/cluster_admin.h"
#include "router/admission_controller.h"
#include "router/api_key_table.h"
#include "router/engine_client.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "router/text_codec.h"
#include "router/tool_parser.h"

namespace tandem::router {

// The model behind the API (from the model's config and tokenizer).
struct ServedModel {
  std::string id;                     // name clients put in "model"
  int32_t max_context_tokens = 4096;  // prompt + completion limit
  int32_t vocab_size = 32000;         // token ids must be < this
  int64_t created = 0;                // unix seconds shown by /v1/models
  // The model's EOS ids (config.json + generation_config.json): a sequence the
  // engine ends with one adds no text for it (unless include_stop_str_in_output).
  std::vector<TokenId> eos_token_ids;
  // How chat output is parsed into tool calls for tool_choice "auto"
  // (RouterConfig::tool_call_parser resolved against the chat template); kNone:
  // "auto" with tools is a 400.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};

// Everything the server needs from the rest of the process. Pointers are not
// owned and must outlive the HttpServer.
struct RouterDeps {
  EngineClient* engine = nullptr;
  const TextCodec* codec = nullptr;
  ServedModel model;
  // /health/ready; nullptr = always ready. While false, inference gets 503.
  std::function<bool()> is_ready;
  // /metrics body (Prometheus text format); nullptr = empty body.
  std::function<std::string()> metrics_text;
  // Registry the router's serving metrics (RouterMetrics: TTFT, ITL, e2e,
  // queue, load, tokens, finished/rejected requests) are registered in;
  // nullptr = none. Not owned.
  metrics::MetricsRegistry* metrics = nullptr;
  // The operator endpoints' cluster (/admin/*, behind RouterConfig::admin_key);
  // nullptr = no admin API (404). Not owned.
  ClusterAdmin* admin = nullptr;
};

struct RouterContext {
  RouterContext(RouterConfig config_in, RouterDeps deps_in)
      : config(std::move(config_in)),
        deps(std::move(deps_in)),
        keys(config.api_keys),
        admin_auth(config.admin_key),
        admission(config.max_concurrent_requests, config.max_queued_requests),
        metrics(deps.metrics, ModelName(), deps.model.max_context_tokens) {}

  // Serving: not draining and the cluster can take work.
  bool Ready() const { return !draining.load() && (!deps.is_ready || deps.is_ready()); }
  const std::string& ModelName() const {
    return config.served_model_name.empty() ? deps.model.id : config.served_model_name;
  }

  const RouterConfig config;
  const RouterDeps deps;
  const ApiKeyTable keys;
  const AdminAuth admin_auth;
  AdmissionController admission;
  const RouterMetrics metrics;
  // Set by HttpServer::Drain: new inference requests get 503, running ones finish.
  std::atomic<bool> draining{false};
};

}  // namespace tandem::router
