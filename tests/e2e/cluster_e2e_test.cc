// The disaggregated cluster end to end: tandem-router, tandem-prefill and
// tandem-decode as separate processes on loopback, KV over UCX (tcp). Greedy
// output through router -> prefill -> UCX -> decode must equal single-process
// generation with the same model (the in-process Engine on the CPU backend).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"
#include "tests/router/test_http_client.h"

namespace tandem::e2e {
namespace {

namespace http = tandem::router::testing;
using nlohmann::json;

class ClusterE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(::testing::TempDir() + "/tandem-e2e-" + std::to_string(getpid()));
    std::filesystem::create_directories(*root_);
    ASSERT_TRUE(MakeTinyModel(*root_ + "/tiny"));
    cluster_ = new LocalCluster(*root_);
    cluster_->Start();
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
    auto tok = tokenizer::Tokenizer::FromFile(cluster_->model_dir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok());
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete tokenizer_;
    std::filesystem::remove_all(*root_);
    delete root_;
  }

  // Greedy tokens from one in-process engine on the same model: the oracle.
  static std::vector<TokenId> ReferenceTokens(const std::vector<TokenId>& prompt, int max_tokens) {
    return e2e::ReferenceTokens(cluster_->model_dir(), prompt, max_tokens);
  }

  static std::string Text(const std::vector<TokenId>& ids) {
    return *tokenizer_->Decode(ids, /*skip_special_tokens=*/true);
  }

  static std::vector<TokenId> PromptOfLength(int n, int salt) {
    std::vector<TokenId> p(n);
    for (int i = 0; i < n; ++i) p[i] = 40 + (i * 7 + salt * 13) % 200;
    return p;
  }

  static std::string* root_;
  static LocalCluster* cluster_;
  static tokenizer::Tokenizer* tokenizer_;
};

std::string* ClusterE2eTest::root_ = nullptr;
LocalCluster* ClusterE2eTest::cluster_ = nullptr;
tokenizer::Tokenizer* ClusterE2eTest::tokenizer_ = nullptr;

std::string StreamedText(const std::string& body, json* usage) {
  std::string text;
  for (const std::string& event : http::SseEvents(body)) {
    if (event == "[DONE]") continue;
    json chunk = json::parse(event, nullptr, false);
    if (chunk.is_discarded()) continue;
    if (chunk.contains("usage") && chunk["usage"].is_object()) *usage = chunk["usage"];
    for (const auto& c : chunk.value("choices", json::array())) {
      if (c.contains("text")) text += c["text"].get<std::string>();
      if (c.contains("delta") && c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    }
  }
  return text;
}

// Prompt lengths 1, block-1, block, block+1 and many blocks (block = 16).
TEST_F(ClusterE2eTest, GreedyOutputEqualsSingleProcess) {
  for (int len : {1, 15, 16, 17, 70}) {
    std::vector<TokenId> prompt = PromptOfLength(len, len);
    std::string expected = Text(ReferenceTokens(prompt, 12));
    json body = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
    http::HttpResult plain = http::Post(cluster_->http_port(), "/v1/completions", body);
    ASSERT_EQ(plain.status, 200) << plain.body;
    json reply = plain.Json();
    EXPECT_EQ(reply["choices"][0]["text"], expected) << "prompt length " << len;
    EXPECT_EQ(reply["usage"]["prompt_tokens"], len);
    EXPECT_EQ(reply["usage"]["completion_tokens"], 12);

    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    http::HttpResult streamed = http::Post(cluster_->http_port(), "/v1/completions", body);
    ASSERT_EQ(streamed.status, 200);
    json usage;
    EXPECT_EQ(StreamedText(streamed.body, &usage), expected) << "streamed, prompt length " << len;
    EXPECT_EQ(usage["completion_tokens"], 12);
  }
}

// include_timing through the real cluster: a prompt of its own goes the disaggregated path
// (prefill node, KV over UCX, decode), so every node stage is measured; the nodes log the
// stages at info under the request's id.
TEST_F(ClusterE2eTest, IncludeTimingMeasuresEveryStage) {
  std::vector<TokenId> prompt = PromptOfLength(48, 48000);
  json body = {{"model", "tiny"},    {"prompt", prompt},       {"max_tokens", 8},
               {"temperature", 0},   {"ignore_eos", true},     {"include_timing", true}};
  http::HttpResult r = http::Post(cluster_->http_port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json t = r.Json()["usage"]["timing"];
  for (const char* stage : {"router_queue", "decode_queue", "prefill_queue", "prefill", "kv_transfer", "kv_wait",
                            "first_token", "first_decode_step", "decode", "total"}) {
    ASSERT_TRUE(t.contains(stage)) << stage << " missing: " << t.dump();
    EXPECT_GE(t[stage].get<double>(), 0.0) << stage;
  }
  EXPECT_GT(t["prefill"].get<double>(), 0.0) << t.dump();
  EXPECT_GT(t["kv_wait"].get<double>(), 0.0) << "decode waited for the remote KV: " << t.dump();
  // Durations on other clocks, but each inside the router's first-token time.
  EXPECT_LE(t["prefill"].get<double>(), t["first_token"].get<double>()) << t.dump();
  EXPECT_LE(t["kv_wait"].get<double>(), t["first_token"].get<double>()) << t.dump();
  EXPECT_LE(t["first_token"].get<double>() + t["first_decode_step"].get<double>(), t["total"].get<double>() + 1e-9);
  EXPECT_NE(r.headers["server-timing"].find("kv-wait;dur="), std::string::npos) << r.headers["server-timing"];
  for (const char* node : {"prefill", "decode"}) {
    bool logged = false;
    for (int i = 0; i < 50 && !logged; ++i) {
      logged = cluster_->procs().FullLog(node).find("stages (ms): decode_queue") != std::string::npos;
      if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(logged) << node << " did not log the stages:\n" << cluster_->procs().FullLog(node);
  }
}

TEST_F(ClusterE2eTest, ChatMatchesTemplateAndEngine) {
  auto tmpl = tokenizer::ChatTemplate::FromModelDir(cluster_->model_dir());
  auto cfg = tokenizer::TokenizerConfig::FromModelDir(cluster_->model_dir());
  ASSERT_TRUE(tmpl.ok() && cfg.ok());
  json messages = json::array(
      {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Name a prime number."}}});
  tokenizer::ChatRenderOptions options;
  options.bos_token = cfg->bos_token;
  options.eos_token = cfg->eos_token;
  auto rendered = tmpl->Render(messages, options);
  ASSERT_TRUE(rendered.ok());
  auto ids = tokenizer_->Encode(*rendered, /*add_special_tokens=*/false);
  ASSERT_TRUE(ids.ok());
  std::string expected = Text(ReferenceTokens(*ids, 10));
  json body = {{"model", "tiny"},
               {"messages", messages},
               {"max_tokens", 10},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  http::HttpResult r = http::Post(cluster_->http_port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json usage;
  EXPECT_EQ(StreamedText(r.body, &usage), expected);
  EXPECT_EQ(usage["prompt_tokens"], static_cast<int>(ids->size()));
}

TEST_F(ClusterE2eTest, RepeatedPromptHitsDecodePrefixCacheAndSendsOnlyTheSuffix) {
  std::vector<TokenId> prompt = PromptOfLength(80, 99);
  json body = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}};
  double bytes_before = cluster_->Metric("prefill", "tandem_kv_transfer_bytes_total");
  http::HttpResult first = http::Post(cluster_->http_port(), "/v1/completions", body);
  ASSERT_EQ(first.status, 200) << first.body;
  double bytes_first = cluster_->Metric("prefill", "tandem_kv_transfer_bytes_total") - bytes_before;
  http::HttpResult second = http::Post(cluster_->http_port(), "/v1/completions", body);
  ASSERT_EQ(second.status, 200);
  double bytes_second = cluster_->Metric("prefill", "tandem_kv_transfer_bytes_total") - bytes_before - bytes_first;
  EXPECT_EQ(first.Json()["choices"][0]["text"], second.Json()["choices"][0]["text"]);
  EXPECT_EQ(first.Json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // 80 tokens = 5 full blocks; decode reuses 4 and computes the last block's tokens.
  EXPECT_EQ(second.Json()["usage"]["prompt_tokens_details"]["cached_tokens"], 64);
  EXPECT_GT(bytes_first, 0);
  EXPECT_LT(bytes_second, bytes_first) << "a prefix hit on decode transfers only the suffix";
}

TEST_F(ClusterE2eTest, NodesAreKvCleanWhenIdle) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const char* role : {"decode", "prefill"}) {
    EXPECT_EQ(cluster_->Metric(role, "tandem_num_requests_running"), 0) << role;
    EXPECT_EQ(cluster_->Metric(role, "tandem_num_requests_waiting"), 0) << role;
    EXPECT_EQ(cluster_->Metric(role, "tandem_kv_blocks_referenced"), 0) << role;
    EXPECT_EQ(cluster_->Metric(role, "tandem_kv_reservations_active"), 0) << role;
  }
}

// Last: kills the decode node once a stream has begun; the client must get a
// terminal outcome (SSE error event, [DONE], close) within 5 s.
TEST_F(ClusterE2eTest, ZKillDecodeMidStreamEndsTheStream) {
  json body = {{"model", "tiny"},    {"prompt", PromptOfLength(20, 5)},
               {"max_tokens", 480},  {"temperature", 0},
               {"ignore_eos", true}, {"stream", true}};
  std::string payload = body.dump();
  std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(payload.size()) + "\r\n\r\n" + payload;
  boost::asio::io_context ioc;
  auto socket = http::Connect(ioc, cluster_->http_port());
  boost::asio::write(socket, boost::asio::buffer(request));
  std::string received;
  char buf[4096];
  boost::system::error_code ec;
  // Read until the first token event is on the wire, then kill decode.
  while (received.find("data: {") == std::string::npos && !ec) {
    size_t n = socket.read_some(boost::asio::buffer(buf), ec);
    received.append(buf, n);
  }
  ASSERT_FALSE(ec) << "stream did not start";
  cluster_->procs().Signal("decode", SIGKILL);
  auto start = std::chrono::steady_clock::now();
  while (!ec && received.find("data: [DONE]") == std::string::npos) {
    size_t n = socket.read_some(boost::asio::buffer(buf), ec);
    received.append(buf, n);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos) << "the stream ends cleanly";
  // 480 tokens take far longer than the kill: the stream must end with an error event.
  EXPECT_NE(received.find("\"error\""), std::string::npos)
      << "terminal error event: " << received.substr(received.size() > 600 ? received.size() - 600 : 0);
  EXPECT_EQ(cluster_->Metric("prefill", "tandem_kv_blocks_referenced"), 0);
}

}  // namespace
}  // namespace tandem::e2e
