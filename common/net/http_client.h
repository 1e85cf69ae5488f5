// A blocking HTTP/1.1 client for the command-line tools (tandem-ctl,
// tandem-bench-serving's /metrics pages): one request per call over plain TCP
// (Boost.Beast), with a deadline. Not for the serving path: the router and the
// nodes only serve HTTP.
// Thread rule: free functions with no shared state; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace tandem::net {

// Where a URL points: "http://host:port/path" (port 80 and path "/" when left out).
struct HttpUrl {
  std::string host;
  std::string port = "80";
  std::string path = "/";
};

// InvalidArgument for another scheme (https is not spoken) or a malformed URL.
StatusOr<HttpUrl> ParseHttpUrl(const std::string& url);

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";                                  // path and query
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host (and Content-Length)
  std::string body;
  int64_t timeout_ms = 10'000;  // connect, send and receive, all together
};

struct HttpResponse {
  int status = 0;
  std::string body;
};

// Sends `request` to host:port and reads the whole answer (at most 64 MiB of body).
// Any HTTP status is a response; Unavailable naming host:port when the server
// cannot be reached, closes early, or the deadline passes.
StatusOr<HttpResponse> SendHttpRequest(const std::string& host, const std::string& port, const HttpRequest& request);

}  // namespace tandem::net
