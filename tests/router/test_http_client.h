// A small blocking HTTP client over loopback for router tests (Boost.Beast),
// plus raw-socket helpers for malformed and slow clients.
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::router::testing {

struct HttpResult {
  int status = 0;                              // 0 = the connection failed or closed without a response
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

inline void SetRecvTimeout(boost::asio::ip::tcp::socket& socket, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

inline boost::asio::ip::tcp::socket Connect(boost::asio::io_context& ioc, uint16_t port) {
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  SetRecvTimeout(socket, 10'000);
  return socket;
}

inline HttpResult Send(uint16_t port, const std::string& method, const std::string& target,
                       const std::string& body = "", const Headers& headers = {}) {
  namespace http = boost::beast::http;
  boost::asio::io_context ioc;
  HttpResult result;
  boost::beast::error_code ec;
  auto socket = Connect(ioc, port);
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req, ec);
  if (ec) return result;
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(socket, buffer, parser, ec);
  if (ec) return result;
  const auto& res = parser.get();
  result.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    result.headers[name] = std::string(field.value());
  }
  result.body = res.body();
  return result;
}

inline HttpResult Post(uint16_t port, const std::string& target, const nlohmann::json& body,
                       const Headers& headers = {}) {
  return Send(port, "POST", target, body.dump(), headers);
}

// The `data:` payloads of an SSE body, in order.
inline std::vector<std::string> SseEvents(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) events.push_back(event.substr(6));
    pos = end + 2;
  }
  return events;
}

// Writes raw bytes, then reads until EOF or timeout; returns what arrived.
inline std::string RawExchange(uint16_t port, const std::string& bytes, int timeout_ms = 5000) {
  boost::asio::io_context ioc;
  auto socket = Connect(ioc, port);
  SetRecvTimeout(socket, timeout_ms);
  boost::beast::error_code ec;
  boost::asio::write(socket, boost::asio::buffer(bytes), ec);
  std::string out;
  char buf[4096];
  for (;;) {
    const size_t n = socket.read_some(boost::asio::buffer(buf), ec);
    if (ec) break;
    out.append(buf, n);
  }
  return out;
}

}  // namespace tandem::router::testing
