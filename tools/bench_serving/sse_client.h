// A blocking HTTP/1.1 client: POSTs one streaming OpenAI request and times its
// SSE chunks, or GETs a page (/metrics). One call per request; thread-safe (no
// shared state).
#pragma once

#include <string>

#include "common/base/status.h"
#include "tools/bench_serving/serving_stats.h"

namespace tandem::bench {

struct Endpoint {
  std::string host = "127.0.0.1";
  std::string port = "8000";
  std::string path = "/v1/completions";
  std::string api_key;  // sent as "Authorization: Bearer" when not empty
  double timeout_s = 600;
};

// Sends `body` (must ask for stream=true and stream_options.include_usage=true)
// and records TTFT, inter-chunk gaps, e2e and usage. Never throws; failures are
// records with ok=false and an error text (HTTP status, SSE error event, I/O).
RequestRecord SendStreaming(const Endpoint& endpoint, const std::string& body);

// "http://host:port/path" (port defaults to 80, path to "/") as an Endpoint.
// InvalidArgument for other schemes and malformed URLs.
StatusOr<Endpoint> ParseHttpUrl(const std::string& url);

// GETs endpoint.path; the body of a 200 answer, Unavailable otherwise.
StatusOr<std::string> HttpGet(const Endpoint& endpoint);

}  // namespace tandem::bench
