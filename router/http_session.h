// HttpSession: one client connection (HTTP/1.1 with keep-alive).
//
// Reads a request with header/body size limits and read timeouts, routes it
// (health, metrics, the two inference endpoints, models, tokenize, detokenize,
// version: utility_endpoints.h; the operator endpoints: admin_endpoints.h), writes plain or
// chunked SSE responses with write timeouts, and notices a client that goes
// away mid-request (a read-readiness watch plus write errors) so the
// CompletionCall can cancel. Thread rule: every method runs on the
// connection's strand (the socket's executor).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "router/completion_call.h"
#include "router/router_context.h"

namespace tandem::router {

class HttpSession : public ResponseSink, public std::enable_shared_from_this<HttpSession> {
 public:
  // `socket` must have been accepted onto a strand.
  HttpSession(boost::asio::ip::tcp::socket&& socket, RouterContext* context);

  void Start();
  // Ends the connection (and its call, which cancels its engine requests).
  // Thread-safe: runs on the strand.
  void Shutdown();

  // ResponseSink (used by the active CompletionCall).
  void AddHeader(std::string name, std::string value) override;
  void Respond(int http_status, std::string json_body, int retry_after_s) override;
  void BeginStream() override;
  void WriteStream(std::string data) override;
  void EndStream(bool close_connection) override;

 private:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  void DoRead();
  void OnHeader(boost::beast::error_code ec);
  void ReadBody();
  void OnBody(boost::beast::error_code ec);
  void Route();
  void RouteInference(const Request& request, ApiKind kind);
  // /v1/models[/{id}], /tokenize, /detokenize, /version (API key).
  void RouteUtility(const Request& request, std::string_view path);
  void WriteResponse(int http_status, std::string content_type, std::string body, int retry_after_s, bool force_close);
  void WriteError(const ApiError& error, int retry_after_s = -1, bool force_close = false);
  void FlushStream();
  void OnStreamWritten(boost::beast::error_code ec);
  void WatchDisconnect();
  void OnReadable(boost::beast::error_code ec, uint64_t seq);
  // Half-closes, discards what the client still sends (bounded in time and
  // bytes), then closes.
  void DrainAndClose();
  void DrainSome();
  void AbortCall();
  void Close();

  boost::beast::tcp_stream stream_;
  RouterContext* const context_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool keep_alive_ = true;
  std::vector<std::pair<std::string, std::string>> extra_headers_;  // for this request's response
  unsigned version_ = 11;
  std::shared_ptr<CompletionCall> call_;  // the inference call in progress, if any
  uint64_t call_seq_ = 0;                 // counts calls, to retire stale disconnect watches
  bool closed_ = false;
  char drain_buffer_[4096];
  size_t drained_bytes_ = 0;

  // Streaming state: at most one write in flight; later data waits in pending_.
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> stream_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> stream_serializer_;
  std::string pending_;
  std::string in_flight_;
  bool writing_ = false;
  bool stream_end_requested_ = false;
  bool last_chunk_in_flight_ = false;
  bool close_after_stream_ = false;
  bool raw_stream_ = false;  // HTTP/1.0 client: no chunk framing, close at the end
};

}  // namespace tandem::router
