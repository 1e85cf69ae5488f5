#include "common/net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <string_view>

namespace tandem::net {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

constexpr uint64_t kMaxBodyBytes = uint64_t{64} << 20;

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return InvalidArgumentError("not an http:// URL: " + url);
  const std::string rest = url.substr(kScheme.size());
  HttpUrl parsed;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) parsed.path = rest.substr(slash);
  const std::string authority = rest.substr(0, slash);
  const size_t colon = authority.rfind(':');
  parsed.host = authority.substr(0, colon);
  if (colon != std::string::npos) parsed.port = authority.substr(colon + 1);
  const bool port_ok = !parsed.port.empty() && parsed.port.size() <= 5 &&
                       parsed.port.find_first_not_of("0123456789") == std::string::npos;
  if (parsed.host.empty() || !port_ok) {
    return InvalidArgumentError("malformed URL (want http://host:port/path): " + url);
  }
  return parsed;
}

StatusOr<HttpResponse> SendHttpRequest(const std::string& host, const std::string& port, const HttpRequest& request) {
  const std::string where = request.method + " http://" + host + ":" + port + request.target;
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::milliseconds(request.timeout_ms));
    stream.connect(resolver.resolve(host, port));
    http::request<http::string_body> req{http::string_to_verb(request.method), request.target, 11};
    req.set(http::field::host, host);
    for (const auto& [name, value] : request.headers) req.set(name, value);
    req.body() = request.body;
    req.prepare_payload();
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxBodyBytes);
    http::read(stream, buffer, parser);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return HttpResponse{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
  } catch (const std::exception& e) {
    return UnavailableError(where + ": " + e.what());
  }
}

}  // namespace tandem::net
