#include "tools/bench_serving/sse_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <limits>
#include <string_view>
#include <utility>

#include "common/net/http_client.h"

namespace tandem::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Consumes complete "data: ..." events from `pending`; updates the record.
// Returns true once "[DONE]" was seen.
bool ConsumeEvents(std::string& pending, SteadyClock::time_point start, double& last_chunk_s, RequestRecord& record) {
  size_t pos;
  while ((pos = pending.find("\n\n")) != std::string::npos) {
    std::string event = pending.substr(0, pos);
    pending.erase(0, pos + 2);
    if (event.rfind("data: ", 0) != 0) continue;
    std::string data = event.substr(6);
    if (data == "[DONE]") return true;
    nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      record.error = "unparsable SSE event";
      continue;
    }
    if (j.contains("error")) {
      record.error = j["error"].value("message", "error event");
      continue;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      record.prompt_tokens = j["usage"].value("prompt_tokens", 0);
      record.completion_tokens = j["usage"].value("completion_tokens", 0);
    }
    bool has_content = false;
    if (j.contains("choices") && j["choices"].is_array()) {
      for (const auto& c : j["choices"]) {
        if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) has_content = true;
        if (c.contains("delta") && c["delta"].contains("content")) has_content = true;
      }
    }
    if (!has_content) continue;
    double now = SecondsSince(start);
    if (record.ttft_s == 0) {
      record.ttft_s = now;
    } else {
      record.itl_s.push_back(now - last_chunk_s);
    }
    last_chunk_s = now;
  }
  return false;
}

}  // namespace

RequestRecord SendStreaming(const Endpoint& endpoint, const std::string& body) {
  RequestRecord record;
  SteadyClock::time_point start = SteadyClock::now();
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(endpoint.timeout_s * 1000)));
    stream.connect(resolver.resolve(endpoint.host, endpoint.port));
    http::request<http::string_body> req{http::verb::post, endpoint.path, 11};
    req.set(http::field::host, endpoint.host);
    req.set(http::field::content_type, "application/json");
    if (!endpoint.api_key.empty()) req.set(http::field::authorization, "Bearer " + endpoint.api_key);
    req.body() = body;
    req.prepare_payload();
    http::write(stream, req);

    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // a stream has no size limit (boost::none compares as 0 in Boost 1.74)
    http::read_header(stream, buffer, parser);
    int status = parser.get().result_int();
    std::string pending;
    double last_chunk_s = 0;
    bool done = false;
    char chunk[16384];
    while (!parser.is_done() && !done) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      beast::error_code ec;
      // read_some: returns with whatever arrived; http::read would wait for the buffer to fill
      // (16 KB) or the stream to end, so every event of a short stream would seem to arrive at once.
      http::read_some(stream, buffer, parser, ec);
      if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
      pending.append(chunk, sizeof(chunk) - parser.get().body().size);
      if (status == 200) done = ConsumeEvents(pending, start, last_chunk_s, record);
    }
    record.e2e_s = SecondsSince(start);
    if (status != 200) {
      record.error = "HTTP " + std::to_string(status) + ": " + pending.substr(0, 200);
    } else if (!done) {
      record.error = record.error.empty() ? "stream ended without [DONE]" : record.error;
    } else if (record.error.empty()) {
      record.ok = true;
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  } catch (const std::exception& e) {
    record.ok = false;
    record.error = e.what();
    record.e2e_s = SecondsSince(start);
  }
  return record;
}

StatusOr<Endpoint> ParseHttpUrl(const std::string& url) {
  TANDEM_ASSIGN_OR_RETURN(net::HttpUrl parsed, net::ParseHttpUrl(url));
  Endpoint e;
  e.host = std::move(parsed.host);
  e.port = std::move(parsed.port);
  e.path = std::move(parsed.path);
  return e;
}

StatusOr<std::string> HttpGet(const Endpoint& endpoint) {
  net::HttpRequest request;
  request.target = endpoint.path;
  request.timeout_ms = static_cast<int64_t>(endpoint.timeout_s * 1000);
  TANDEM_ASSIGN_OR_RETURN(net::HttpResponse response, net::SendHttpRequest(endpoint.host, endpoint.port, request));
  if (response.status != 200) {
    return UnavailableError("GET " + endpoint.host + ":" + endpoint.port + endpoint.path + ": HTTP " +
                            std::to_string(response.status));
  }
  return std::move(response.body);
}

}  // namespace tandem::bench
