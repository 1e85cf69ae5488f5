// RELIABILITY.md L4 and C3 on the real cluster (router, prefill, decode
// processes on loopback): 1000 requests at once each get exactly one complete
// HTTP answer (200, or 429/503 with Retry-After) and the cluster serves on; 1000
// streamed requests whose clients hang up at random times leave every node with
// nothing running or waiting and no KV referenced or reserved.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "common/base/ids.h"
#include "tests/e2e/local_cluster.h"

namespace tandem::e2e {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using nlohmann::json;
using tcp = asio::ip::tcp;

constexpr int kRequests = 1000;

// One request on its own connection, all on one io_context. With hang_up_after
// set, the client closes the connection that long after sending (a cancel).
class Client : public std::enable_shared_from_this<Client> {
 public:
  struct Outcome {
    int status = 0;  // 0: no complete answer
    bool retry_after = false;
    bool hung_up = false;
    std::string body;  // of an answer other than 200
  };

  Client(asio::io_context& ioc, uint16_t port, std::string body, std::chrono::milliseconds hang_up_after, Outcome* out)
      : socket_(ioc), timer_(ioc), port_(port), body_(std::move(body)), hang_up_after_(hang_up_after), out_(out) {}

  void Start() {
    auto self = shared_from_this();
    socket_.async_connect({asio::ip::make_address("127.0.0.1"), port_}, [self](beast::error_code ec) {
      if (ec) return;
      self->req_ = bhttp::request<bhttp::string_body>(bhttp::verb::post, "/v1/completions", 11);
      self->req_.set(bhttp::field::host, "127.0.0.1");
      self->req_.set(bhttp::field::content_type, "application/json");
      self->req_.body() = self->body_;
      self->req_.prepare_payload();
      bhttp::async_write(self->socket_, self->req_, [self](beast::error_code ec, size_t) {
        if (ec) return;
        if (self->hang_up_after_.count() >= 0) {
          self->timer_.expires_after(self->hang_up_after_);
          self->timer_.async_wait([self](beast::error_code) {
            self->out_->hung_up = true;
            beast::error_code ignored;
            self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
            self->socket_.close(ignored);
          });
        }
        self->parser_.body_limit(64 << 20);
        bhttp::async_read(self->socket_, self->buffer_, self->parser_, [self](beast::error_code ec, size_t) {
          self->timer_.cancel();
          if (ec) return;
          self->out_->status = static_cast<int>(self->parser_.get().result_int());
          self->out_->retry_after = self->parser_.get().count(bhttp::field::retry_after) > 0;
          if (self->out_->status != 200) self->out_->body = self->parser_.get().body();
        });
      });
    });
  }

 private:
  tcp::socket socket_;
  asio::steady_timer timer_;
  uint16_t port_;
  std::string body_;
  std::chrono::milliseconds hang_up_after_;
  Outcome* out_;
  bhttp::request<bhttp::string_body> req_;
  beast::flat_buffer buffer_;
  bhttp::response_parser<bhttp::string_body> parser_;
};

class LoadE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(::testing::TempDir() + "/tandem-load-" + std::to_string(getpid()));
    std::filesystem::create_directories(*root_);
    ASSERT_TRUE(MakeTinyModel(*root_ + "/tiny"));
    cluster_ = new LocalCluster(*root_);
    cluster_->Start();
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    std::filesystem::remove_all(*root_);
    delete root_;
  }

  // Runs kRequests clients at once; hang_up(i) < 0 keeps client i to the end.
  static std::vector<Client::Outcome> RunClients(const std::function<json(int)>& body,
                                                 const std::function<int(int)>& hang_up_ms) {
    asio::io_context ioc;
    std::vector<Client::Outcome> outcomes(kRequests);
    for (int i = 0; i < kRequests; ++i) {
      std::make_shared<Client>(ioc, cluster_->http_port(), body(i).dump(), std::chrono::milliseconds(hang_up_ms(i)),
                               &outcomes[i])
          ->Start();
    }
    ioc.run_for(std::chrono::seconds(120));
    return outcomes;
  }

  static std::vector<TokenId> Prompt(int i) {
    std::vector<TokenId> p(8 + i % 40);
    for (size_t j = 0; j < p.size(); ++j) p[j] = 40 + (i * 7 + static_cast<int>(j) * 3) % 200;
    return p;
  }

  // Nothing running, waiting, referenced or reserved on any node within `timeout`; else
  // the gauges that are not zero. (A request the router dropped but a node kept running
  // would hold its KV until its 4000 tokens were out: far longer, under ASan.) The router
  // counts a request running until its handler has unwound, which can trail the nodes'
  // cleanup under a sanitizer, so its gauges are polled the same way.
  static std::string KvDirt() {
    return cluster_->KvDirt({"router", "decode", "prefill"}, std::chrono::seconds(5));
  }

  static std::string* root_;
  static LocalCluster* cluster_;
};

std::string* LoadE2eTest::root_ = nullptr;
LocalCluster* LoadE2eTest::cluster_ = nullptr;

TEST_F(LoadE2eTest, ThousandRequestsAtOnceEachGetOneAnswer) {
  const auto start = std::chrono::steady_clock::now();
  auto outcomes = RunClients(
      [](int i) {
        return json{{"model", "tiny"}, {"prompt", Prompt(i)}, {"max_tokens", 1 + i % 8}, {"temperature", 0}};
      },
      [](int) { return -1; });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::map<int, int> by_status;
  for (const auto& o : outcomes) {
    ++by_status[o.status];
    if (o.status == 429 || o.status == 503) {
      EXPECT_TRUE(o.retry_after) << "a refusal says when to retry: " << o.status << " " << o.body;
    }
  }
  std::string summary;
  for (auto [status, count] : by_status) summary += " " + std::to_string(status) + ":" + std::to_string(count);
  EXPECT_EQ(by_status[0], 0) << "requests without a complete answer;" << summary;
  EXPECT_EQ(by_status[200] + by_status[429] + by_status[503], kRequests) << summary;
  EXPECT_GT(by_status[200], 0) << summary;
  EXPECT_EQ(KvDirt(), "");
  EXPECT_EQ(LocalCluster::Get(cluster_->http_port(), "/health/ready").status, 200) << "the router serves on";
  std::printf("%d requests at once: answered in %.2f s;%s\n", kRequests, seconds, summary.c_str());
}

TEST_F(LoadE2eTest, ThousandStreamsCancelledAtRandomTimesLeaveNodesClean) {
  std::mt19937 rng(7);
  std::vector<int> delays(kRequests);
  for (int& d : delays) d = static_cast<int>(rng() % 60);
  auto outcomes = RunClients(
      [](int i) {
        return json{{"model", "tiny"},  {"prompt", Prompt(i)}, {"max_tokens", 4000},
                    {"temperature", 0}, {"ignore_eos", true},  {"stream", true}};
      },
      [&](int i) { return delays[i]; });
  int hung_up = 0;
  for (const auto& o : outcomes) hung_up += o.hung_up;
  EXPECT_GT(hung_up, kRequests / 2) << "most clients must have hung up mid-request";
  const auto hung_up_at = std::chrono::steady_clock::now();
  EXPECT_EQ(KvDirt(), "") << cluster_->Logs();
  const double clean_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - hung_up_at).count();
  // And the cluster still serves.
  json body = {{"model", "tiny"}, {"prompt", Prompt(3)}, {"max_tokens", 4}, {"temperature", 0}};
  router::testing::HttpResult after = router::testing::Post(cluster_->http_port(), "/v1/completions", body);
  EXPECT_EQ(after.status, 200) << after.body << cluster_->Logs();
  std::printf("%d streams, %d hung up by the client; nodes clean %.2f s after the last client left\n", kRequests,
              hung_up, clean_s);
}

}  // namespace
}  // namespace tandem::e2e
