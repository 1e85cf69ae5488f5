#include "router/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/write.hpp>

#include <chrono>

#include "common/base/logging.h"
#include "common/base/version.h"
#include "router/admin_endpoints.h"
#include "router/api_error.h"
#include "router/request_fields.h"
#include "router/utility_endpoints.h"

namespace tandem::router {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

namespace {

std::string_view View(boost::beast::string_view v) { return {v.data(), v.size()}; }

constexpr int kDrainTimeoutMs = 1000;
constexpr size_t kMaxDrainBytes = 1 << 20;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kModelsPrefix = "/v1/models/";
constexpr std::string_view kAdminPrefix = "/admin/";

ApiError MakeError(int http_status, std::string message, std::string code = "") {
  ApiError error;
  error.http_status = http_status;
  error.message = std::move(message);
  error.code = std::move(code);
  return error;
}

}  // namespace

HttpSession::HttpSession(tcp::socket&& socket, RouterContext* context)
    : stream_(std::move(socket)), context_(context) {}

void HttpSession::Start() {
  beast::error_code ec;
  // Lets the disconnect probe peek without ever blocking an I/O thread.
  stream_.socket().non_blocking(true, ec);
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
}

void HttpSession::DoRead() {
  extra_headers_.clear();
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(context_->config.max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(context_->config.max_body_bytes));
  stream_.expires_after(std::chrono::milliseconds(context_->config.header_read_timeout_ms));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void HttpSession::OnHeader(beast::error_code ec) {
  if (ec == http::error::header_limit) {
    return WriteError(MakeError(431, "request header fields too large"), -1, true);
  }
  if (ec == http::error::body_limit) {
    return WriteError(MakeError(413, "request body too large"), -1, true);
  }
  if (ec) {
    // A malformed request line or field gets a 400; a closed, reset or
    // too-slow (timeout) connection gets nothing.
    const bool malformed = ec.category() == beast::http::make_error_code(http::error::bad_method).category() &&
                           ec != http::error::end_of_stream && ec != http::error::partial_message;
    if (!malformed) return Close();
    return WriteError(MakeError(400, "malformed HTTP request: " + ec.message()), -1, true);
  }
  const auto& header = parser_->get();
  const auto num_fields = std::distance(header.begin(), header.end());
  if (num_fields > context_->config.max_header_count) {
    return WriteError(MakeError(431, "too many request header fields"), -1, true);
  }
  if (beast::iequals(header[http::field::expect], "100-continue") && !parser_->is_done()) {
    stream_.expires_after(std::chrono::milliseconds(context_->config.write_timeout_ms));
    net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](beast::error_code wec, size_t) {
                       if (wec) return self->Close();
                       self->ReadBody();
                     });
    return;
  }
  ReadBody();
}

void HttpSession::ReadBody() {
  if (parser_->is_done()) return OnBody({});
  stream_.expires_after(std::chrono::milliseconds(context_->config.body_read_timeout_ms));
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void HttpSession::OnBody(beast::error_code ec) {
  if (ec == http::error::body_limit) {
    return WriteError(MakeError(413, "request body too large"), -1, true);
  }
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset) {
    return Close();
  }
  if (ec) return WriteError(MakeError(400, "malformed HTTP request: " + ec.message()), -1, true);
  stream_.expires_never();
  Route();
}

void HttpSession::Route() {
  const Request& request = parser_->get();
  keep_alive_ = request.keep_alive();
  version_ = request.version();
  std::string_view target(request.target().data(), request.target().size());
  target = target.substr(0, target.find('?'));
  const bool get = request.method() == http::verb::get;
  const bool post = request.method() == http::verb::post;
  if (target == "/v1/completions" || target == "/v1/chat/completions") {
    if (!post) return WriteError(MakeError(405, "use POST for " + std::string(target)));
    return RouteInference(request, target == "/v1/chat/completions" ? ApiKind::kChat : ApiKind::kCompletion);
  }
  if (target.starts_with(kAdminPrefix)) {
    JsonReply reply = HandleAdmin(context_->admin_auth, context_->deps.admin, View(request.method_string()), target,
                                  View(request[http::field::authorization]));
    return WriteResponse(reply.http_status, "application/json", std::move(reply.body), -1, false);
  }
  if (target == "/tokenize" || target == "/detokenize") {
    if (!post) return WriteError(MakeError(405, "use POST for " + std::string(target)));
    return RouteUtility(request, target);
  }
  const bool utility_get = target == "/v1/models" || target == "/version" || target.starts_with(kModelsPrefix);
  if (target == "/health/live" || target == "/health/ready" || target == "/metrics" || utility_get) {
    if (!get) return WriteError(MakeError(405, "use GET for " + std::string(target)));
  }
  if (target == "/health/live") return WriteResponse(200, "application/json", R"({"status":"ok"})", -1, false);
  if (target == "/health/ready") {
    if (context_->Ready()) return WriteResponse(200, "application/json", R"({"status":"ready"})", -1, false);
    const char* body = context_->draining.load() ? R"({"status":"draining"})" : R"({"status":"not ready"})";
    return WriteResponse(503, "application/json", body, context_->config.retry_after_s, false);
  }
  if (target == "/metrics") {
    std::string text = context_->deps.metrics_text ? context_->deps.metrics_text() : "";
    return WriteResponse(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text), -1, false);
  }
  if (utility_get) return RouteUtility(request, target);
  WriteError(MakeError(404, "no route for " + std::string(target)));
}

void HttpSession::RouteUtility(const Request& request, std::string_view path) {
  if (!context_->keys.Authenticate(View(request[http::field::authorization]))) {
    return WriteError(MakeError(401, "invalid or missing API key", "invalid_api_key"));
  }
  JsonReply reply;
  if (path == "/tokenize") {
    reply = HandleTokenize(*context_, request.body());
  } else if (path == "/detokenize") {
    reply = HandleDetokenize(*context_, request.body());
  } else if (path == "/version") {
    reply = VersionReply(BuildVersion());
  } else if (path == "/v1/models") {
    nlohmann::json list = {{"object", "list"}, {"data", nlohmann::json::array({ModelObject(*context_)})}};
    reply.body = DumpJson(list);
  } else {
    // Served model names may hold a '/' ("org/model"), escaped or not.
    std::optional<std::string> id = PercentDecode(path.substr(kModelsPrefix.size()));
    if (!id) return WriteError(MakeError(400, "malformed percent-escape in the model id"));
    reply = RetrieveModel(*context_, *id);
  }
  if (!reply.ignored_fields.empty()) {
    AddHeader(kIgnoredFieldsHeader, IgnoredFieldsHeaderValue(reply.ignored_fields));
  }
  WriteResponse(reply.http_status, "application/json", std::move(reply.body), -1, false);
}

void HttpSession::RouteInference(const Request& request, ApiKind kind) {
  std::optional<ApiKeyGrant> grant = context_->keys.Authenticate(View(request[http::field::authorization]));
  if (!grant) return WriteError(MakeError(401, "invalid or missing API key", "invalid_api_key"));
  ++call_seq_;
  call_ =
      std::make_shared<CompletionCall>(context_, shared_from_this(), stream_.get_executor(), kind, std::move(*grant));
  WatchDisconnect();
  std::shared_ptr<CompletionCall> call = call_;  // Run may end the call synchronously
  call->Run(request.body());
}

void HttpSession::AddHeader(std::string name, std::string value) {
  extra_headers_.emplace_back(std::move(name), std::move(value));
}

void HttpSession::Respond(int http_status, std::string json_body, int retry_after_s) {
  call_.reset();
  WriteResponse(http_status, "application/json", std::move(json_body), retry_after_s, false);
}

void HttpSession::WriteError(const ApiError& error, int retry_after_s, bool force_close) {
  WriteResponse(error.http_status, "application/json", error.ToBody(), retry_after_s, force_close);
}

void HttpSession::WriteResponse(int http_status, std::string content_type, std::string body, int retry_after_s,
                                bool force_close) {
  if (closed_) return;
  auto response = std::make_shared<http::response<http::string_body>>();
  response->result(static_cast<unsigned>(http_status));
  response->version(version_);
  response->set(http::field::server, "tandem-router");
  response->set(http::field::content_type, content_type);
  for (const auto& [name, value] : extra_headers_) response->set(name, value);
  // Every 429 and 503 says when to come back, whichever path refused.
  if (retry_after_s < 0 && (http_status == 429 || http_status == 503)) retry_after_s = context_->config.retry_after_s;
  if (retry_after_s >= 0) response->set(http::field::retry_after, std::to_string(retry_after_s));
  response->keep_alive(keep_alive_ && !force_close);
  response->body() = std::move(body);
  response->prepare_payload();
  stream_.expires_after(std::chrono::milliseconds(context_->config.write_timeout_ms));
  http::async_write(stream_, *response,
                    [self = shared_from_this(), response, force_close](beast::error_code ec, size_t) {
                      if (ec) return self->Close();
                      // After an early error the request may be partly unread;
                      // closing with unread data would reset the connection and
                      // could destroy the response before the client reads it.
                      if (force_close) return self->DrainAndClose();
                      if (!response->keep_alive()) return self->Close();
                      self->DoRead();
                    });
}

void HttpSession::BeginStream() {
  stream_header_.emplace(http::status::ok, version_);
  stream_header_->set(http::field::server, "tandem-router");
  stream_header_->set(http::field::content_type, "text/event-stream; charset=utf-8");
  stream_header_->set(http::field::cache_control, "no-cache");
  for (const auto& [name, value] : extra_headers_) stream_header_->set(name, value);
  // HTTP/1.0 has no chunked encoding: the body then ends when the connection closes.
  raw_stream_ = version_ < 11;
  if (raw_stream_) keep_alive_ = false;
  stream_header_->keep_alive(keep_alive_);
  stream_header_->chunked(!raw_stream_);
  stream_serializer_.emplace(*stream_header_);
  writing_ = true;
  stream_.expires_after(std::chrono::milliseconds(context_->config.write_timeout_ms));
  http::async_write_header(stream_, *stream_serializer_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->OnStreamWritten(ec); });
}

void HttpSession::WriteStream(std::string data) {
  if (closed_) return;
  pending_ += data;
  if (!writing_) FlushStream();
}

void HttpSession::EndStream(bool close_connection) {
  stream_end_requested_ = true;
  close_after_stream_ = close_connection;
  if (!writing_) FlushStream();
}

void HttpSession::FlushStream() {
  if (closed_) return;
  stream_.expires_after(std::chrono::milliseconds(context_->config.write_timeout_ms));
  auto done = [self = shared_from_this()](beast::error_code ec, size_t) { self->OnStreamWritten(ec); };
  if (!pending_.empty()) {
    in_flight_.swap(pending_);
    pending_.clear();
    writing_ = true;
    if (raw_stream_) {
      net::async_write(stream_, net::buffer(in_flight_), std::move(done));
    } else {
      net::async_write(stream_, http::make_chunk(net::buffer(in_flight_)), std::move(done));
    }
  } else if (stream_end_requested_) {
    stream_end_requested_ = false;
    last_chunk_in_flight_ = true;
    writing_ = true;
    if (raw_stream_) {
      net::async_write(stream_, net::buffer(in_flight_.data(), 0), std::move(done));
    } else {
      net::async_write(stream_, http::make_chunk_last(), std::move(done));
    }
  }
}

void HttpSession::OnStreamWritten(beast::error_code ec) {
  writing_ = false;
  if (ec) {  // the client is gone or too slow to read
    AbortCall();
    return Close();
  }
  if (!last_chunk_in_flight_) return FlushStream();
  last_chunk_in_flight_ = false;
  call_.reset();
  stream_serializer_.reset();
  stream_header_.reset();
  in_flight_.clear();
  if (close_after_stream_ || !keep_alive_) return Close();
  DoRead();
}

void HttpSession::WatchDisconnect() {
  // One watch per call: a watch armed for an earlier call ends quietly.
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), seq = call_seq_](
                                                          beast::error_code ec) { self->OnReadable(ec, seq); });
}

void HttpSession::OnReadable(beast::error_code ec, uint64_t seq) {
  if (ec || !call_ || closed_ || seq != call_seq_) return;
  char byte = 0;
  beast::error_code peek_ec;
  const size_t n = stream_.socket().receive(net::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
  if (peek_ec == net::error::would_block) return WatchDisconnect();
  if (peek_ec || n == 0) {
    AbortCall();
    return Close();
  }
  // A pipelined next request is waiting; it is read once this one is answered.
}

void HttpSession::DrainAndClose() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  drained_bytes_ = 0;
  stream_.expires_after(std::chrono::milliseconds(kDrainTimeoutMs));
  DrainSome();
}

void HttpSession::DrainSome() {
  stream_.async_read_some(net::buffer(drain_buffer_), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->drained_bytes_ += n;
    if (ec || self->drained_bytes_ > kMaxDrainBytes) return self->Close();
    self->DrainSome();
  });
}

void HttpSession::AbortCall() {
  if (!call_) return;
  std::shared_ptr<CompletionCall> call = std::move(call_);
  call->OnClientGone();
}

void HttpSession::Shutdown() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
}

void HttpSession::Close() {
  if (closed_) return;
  closed_ = true;
  AbortCall();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

}  // namespace tandem::router
