// StreamLoad: a closed-loop load of streamed completions against the router for
// e2e tests: `concurrency` clients, each sending a request, reading its whole SSE
// response, checking it, and sending the next, until Stop(). A response counts as
// served when it is a 200 whose stream has no error event, ends with [DONE] and
// carries exactly the text the test expects for that request; anything else is a
// failure, kept with its body for the message. With retry_refused, a request the
// router refused before taking it (connection refused, 503, or a connection closed
// before any byte of an answer: one left in the listen queue of a router that
// stopped) is counted as refused and sent again 100 ms later, as the OpenAI SDKs
// retry. A stream cut after its answer began is always a failure.
// Thread rule: Start/Stop/result from one test thread; the clients run on the
// load's own thread (one io_context).
#pragma once

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/router/test_http_client.h"

namespace tandem::e2e {

class StreamLoad {
 public:
  struct Result {
    int served = 0;
    int failed = 0;
    int refused = 0;                    // with retry_refused: refusals that were sent again
    std::vector<std::string> failures;  // the first few, with their bodies
  };
  // Request i: body(i) is the JSON sent, expected(i) the text its stream must carry.
  using BodyFn = std::function<nlohmann::json(int)>;
  using ExpectedFn = std::function<std::string(int)>;

  StreamLoad(uint16_t port, int concurrency, BodyFn body, ExpectedFn expected, bool retry_refused = false)
      : port_(port),
        concurrency_(concurrency),
        body_(std::move(body)),
        expected_(std::move(expected)),
        retry_refused_(retry_refused) {}
  ~StreamLoad() { Stop(std::chrono::seconds(0)); }

  void Start() {
    work_ = std::make_unique<Guard>(boost::asio::make_work_guard(ioc_));
    for (int c = 0; c < concurrency_; ++c) Next();
    thread_ = std::thread([this] { ioc_.run(); });
  }

  // Sends no new request; waits up to `timeout` for those in flight.
  void Stop(std::chrono::seconds timeout) {
    stopping_ = true;
    if (!thread_.joinable()) return;
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (in_flight_.load() > 0 && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    work_.reset();
    ioc_.stop();
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_.load() > 0) {
      result_.failed += in_flight_.load();
      result_.failures.push_back(std::to_string(in_flight_.load()) + " requests got no complete answer");
    }
  }

  Result result() {
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }
  int sent() const { return next_index_.load(); }

 private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  struct Call : std::enable_shared_from_this<Call> {
    Call(boost::asio::io_context& ioc, StreamLoad* load, int index)
        : socket(ioc), retry_timer(ioc), load(load), index(index) {}
    boost::asio::ip::tcp::socket socket;
    boost::asio::steady_timer retry_timer;
    StreamLoad* load;
    int index;
    boost::beast::http::request<boost::beast::http::string_body> request;
    boost::beast::flat_buffer buffer;
    boost::beast::http::response_parser<boost::beast::http::string_body> parser;
  };

  void Next() {
    if (stopping_) return;
    in_flight_.fetch_add(1);
    Send(next_index_.fetch_add(1));
  }

  // Sends request `index` (counted in in_flight_ by the caller).
  void Send(int index) {
    auto call = std::make_shared<Call>(ioc_, this, index);
    call->request = {boost::beast::http::verb::post, "/v1/completions", 11};
    call->request.set(boost::beast::http::field::host, "127.0.0.1");
    call->request.set(boost::beast::http::field::content_type, "application/json");
    call->request.body() = body_(index).dump();
    call->request.prepare_payload();
    call->parser.body_limit(64 << 20);
    const boost::asio::ip::tcp::endpoint router(boost::asio::ip::make_address("127.0.0.1"), port_);
    call->socket.async_connect(router, [call](boost::beast::error_code ec) {
      if (ec) return call->load->Done(*call, "connect: " + ec.message());
      boost::beast::http::async_write(call->socket, call->request, [call](boost::beast::error_code ec, size_t) {
        if (ec) return call->load->Done(*call, "write: " + ec.message());
        boost::beast::http::async_read(call->socket, call->buffer, call->parser,
                                       [call](boost::beast::error_code ec, size_t) {
                                         call->load->Done(*call, ec ? "read: " + ec.message() : "");
                                       });
      });
    });
  }

  // Checks the answer of `call` (or records `error`), then starts the next request.
  void Done(Call& call, const std::string& error) {
    const bool unanswered = !error.empty() && !call.parser.is_header_done();
    const bool refused = unanswered || (error.empty() && call.parser.get().result_int() == 503);
    if (retry_refused_ && refused && !stopping_) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++result_.refused;
      }
      auto again = call.shared_from_this();
      again->retry_timer.expires_after(std::chrono::milliseconds(100));
      again->retry_timer.async_wait([again](boost::beast::error_code) { again->load->Send(again->index); });
      return;
    }
    std::string failure = error;
    if (failure.empty()) failure = Check(call.index, call.parser.get().result_int(), call.parser.get().body());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failure.empty()) {
        ++result_.served;
      } else {
        ++result_.failed;
        if (result_.failures.size() < 5) {
          result_.failures.push_back("request " + std::to_string(call.index) + ": " + failure);
        }
      }
    }
    in_flight_.fetch_sub(1);
    Next();
  }

  std::string Check(int index, unsigned status, const std::string& body) const {
    if (status != 200) return "status " + std::to_string(status) + ": " + body.substr(0, 300);
    std::string text;
    bool done = false;
    for (const std::string& event : router::testing::SseEvents(body)) {
      if (event == "[DONE]") {
        done = true;
        continue;
      }
      nlohmann::json chunk = nlohmann::json::parse(event, nullptr, false);
      if (chunk.is_discarded()) return "unparsable event " + event.substr(0, 200);
      if (chunk.contains("error")) return "error event " + event.substr(0, 300);
      for (const auto& c : chunk.value("choices", nlohmann::json::array())) text += c.value("text", "");
    }
    if (!done) return "no [DONE]";
    if (text != expected_(index)) return "text differs from the greedy reference: " + text.substr(0, 120);
    return "";
  }

  const uint16_t port_;
  const int concurrency_;
  const BodyFn body_;
  const ExpectedFn expected_;
  const bool retry_refused_;
  boost::asio::io_context ioc_;
  std::unique_ptr<Guard> work_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> next_index_{0};
  std::atomic<int> in_flight_{0};
  std::mutex mu_;
  Result result_;  // guarded by mu_
};

}  // namespace tandem::e2e
