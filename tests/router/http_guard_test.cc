// Bad input, limits, auth, backpressure and disconnects over loopback sockets.
#include <chrono>
#include <thread>

#include "router/utf8_stream.h"
#include "tests/router/router_fixture.h"

namespace tandem::router::testing {
namespace {

using nlohmann::json;

class HttpGuardTest : public RouterFixture {};

struct BadCase {
  const char* name;
  const char* target;
  std::string body;
  int status;
  const char* param;  // expected error.param; nullptr = null
  const char* code = nullptr;
};

std::string Nested(int depth) {
  return R"({"prompt":"x","a":)" + std::string(depth, '[') + std::string(depth, ']') + "}";
}

TEST_F(HttpGuardTest, BadInputTable) {
  StartServer();
  const char* C = "/v1/completions";
  const char* K = "/v1/chat/completions";
  const std::string long_prompt(70, 'a');
  const std::vector<BadCase> cases = {
      {"malformed", C, R"({"prompt": "x",)", 400, nullptr},
      {"truncated", C, R"({"prompt": "x)", 400, nullptr},
      {"empty body", C, "", 400, nullptr},
      {"not an object", C, R"(["prompt"])", 400, nullptr},
      {"invalid utf8", C, "{\"prompt\": \"\xC3\x28\"}", 400, nullptr},
      {"lone high surrogate", C, R"({"prompt": "\ud800"})", 400, nullptr},
      {"lone low surrogate", C, R"({"prompt": "a\udc00b"})", 400, nullptr},
      {"deep nesting", C, Nested(100), 400, nullptr},
      {"missing prompt", C, R"({"model":"tiny"})", 400, "prompt"},
      {"empty prompt", C, R"({"prompt": ""})", 400, "prompt"},
      {"empty prompt list", C, R"({"prompt": []})", 400, "prompt"},
      {"empty string in list", C, R"({"prompt": ["a", ""]})", 400, "prompt[1]"},
      {"mixed prompt list", C, R"({"prompt": ["a", [1]]})", 400, "prompt[1]"},
      {"prompt wrong type", C, R"({"prompt": 5.5})", 400, "prompt"},
      {"prompt object", C, R"({"prompt": {"a": 1}})", 400, "prompt"},
      {"token id too big", C, R"({"prompt": [1, 300]})", 400, "prompt[1]"},
      {"token id negative", C, R"({"prompt": [[1], [-1]]})", 400, "prompt[1][0]"},
      {"token id huge", C, R"({"prompt": [18446744073709551615]})", 400, "prompt[0]"},
      {"token id float", C, R"({"prompt": [1.5]})", 400, "prompt[0]"},
      {"max_tokens zero", C, R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
      {"max_tokens negative", C, R"({"prompt": "x", "max_tokens": -3})", 400, "max_tokens"},
      {"max_tokens string", C, R"({"prompt": "x", "max_tokens": "9"})", 400, "max_tokens"},
      {"max_tokens float", C, R"({"prompt": "x", "max_tokens": 2.5})", 400, "max_tokens"},
      {"max_tokens over context", C, R"({"prompt": "x", "max_tokens": 63})", 400, "max_tokens",
       "context_length_exceeded"},
      {"prompt over context", C, R"({"prompt": ")" + long_prompt + R"("})", 400, "prompt", "context_length_exceeded"},
      {"temperature high", C, R"({"prompt": "x", "temperature": 2.5})", 400, "temperature"},
      {"temperature negative", C, R"({"prompt": "x", "temperature": -1})", 400, "temperature"},
      {"temperature string", C, R"({"prompt": "x", "temperature": "hot"})", 400, "temperature"},
      {"top_p zero", C, R"({"prompt": "x", "top_p": 0})", 400, "top_p"},
      {"top_p high", C, R"({"prompt": "x", "top_p": 1.5})", 400, "top_p"},
      {"top_k below -1", C, R"({"prompt": "x", "top_k": -2})", 400, "top_k"},
      {"min_p high", C, R"({"prompt": "x", "min_p": 2})", 400, "min_p"},
      {"presence_penalty", C, R"({"prompt": "x", "presence_penalty": 3})", 400, "presence_penalty"},
      {"frequency_penalty", C, R"({"prompt": "x", "frequency_penalty": -3})", 400, "frequency_penalty"},
      {"repetition_penalty zero", C, R"({"prompt": "x", "repetition_penalty": 0})", 400, "repetition_penalty"},
      {"n zero", C, R"({"prompt": "x", "n": 0})", 400, "n"},
      {"n too big", C, R"({"prompt": "x", "n": 1000})", 400, "n"},
      {"seed string", C, R"({"prompt": "x", "seed": "1"})", 400, "seed"},
      {"stream not bool", C, R"({"prompt": "x", "stream": "yes"})", 400, "stream"},
      {"include_usage not bool", C, R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})", 400,
       "stream_options.include_usage"},
      {"stop wrong type", C, R"({"prompt": "x", "stop": 5})", 400, "stop"},
      {"stop empty string", C, R"({"prompt": "x", "stop": ["a", ""]})", 400, "stop"},
      {"stop_token_ids out of range", C, R"({"prompt": "x", "stop_token_ids": [999]})", 400, "stop_token_ids"},
      {"logprobs too many", C, R"({"prompt": "x", "logprobs": 21})", 400, "logprobs"},
      {"top_logprobs too many", K,
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 50})", 400,
       "top_logprobs"},
      {"logit_bias out of range", C, R"({"prompt": "x", "logit_bias": {"5": 1000}})", 400, "logit_bias"},
      {"echo on chat", K, R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", 400, "echo",
       "unsupported_parameter"},
      {"echo not a bool", C, R"({"prompt": "x", "echo": 1})", 400, "echo"},
      {"ignore_eos not bool", C, R"({"prompt": "x", "ignore_eos": 1})", 400, "ignore_eos"},
      {"tool not an object", K, R"({"messages": [{"role": "user", "content": "x"}], "tools": [5]})", 400,
       "tools[0]"},
      {"tools not a list", K, R"({"messages": [{"role": "user", "content": "x"}], "tools": "not-a-list"})", 400,
       "tools"},
      {"tool_choice required without tools", K,
       R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", 400, "tool_choice"},
      {"tool_choice names no tool", K, R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type":
        "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})",
       400, "tool_choice.function.name"},
      {"response_format json_schema without a schema", C,
       R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "a"}}})", 400,
       "response_format.json_schema.schema"},
      {"response_format unsupported keyword", K,
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
        "json_schema": {"name": "a", "schema": {"type": "string", "format": "email"}}}})", 400,
       "response_format.json_schema"},
      {"guided_json not a schema", C, R"({"prompt": "x", "guided_json": 5})", 400, "guided_json"},
      {"guided_choice", K, R"({"messages": [{"role": "user", "content": "x"}], "guided_choice": ["a"]})", 400,
       "guided_choice", "unsupported_parameter"},
      {"priority not an integer", C, R"({"prompt": "x", "priority": "high"})", 400, "priority"},
      {"priority out of range", K, R"({"messages": [{"role": "user", "content": "x"}], "priority": 2147483648})", 400,
       "priority"},
      {"parallel_tool_calls not bool", K,
       R"({"messages": [{"role": "user", "content": "x"}], "parallel_tool_calls": "yes"})", 400, "parallel_tool_calls"},
      {"min_tokens over max_tokens", C, R"({"prompt": "x", "min_tokens": 5, "max_tokens": 4})", 400, "min_tokens"},
      {"min_tokens over default max_tokens", C, R"({"prompt": "x", "min_tokens": 17})", 400, "min_tokens"},
      {"min_tokens negative", C, R"({"prompt": "x", "min_tokens": -1})", 400, "min_tokens"},
      {"include_stop_str_in_output not bool", C, R"({"prompt": "x", "include_stop_str_in_output": 1})", 400,
       "include_stop_str_in_output"},
      {"spaces_between_special_tokens false, specials kept", C,
       R"({"prompt": "x", "skip_special_tokens": false, "spaces_between_special_tokens": false})", 400,
       "spaces_between_special_tokens", "unsupported_parameter"},
      {"assistant tool_call without function", K,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c"}]}]})", 400,
       "messages[1].tool_calls[0].function"},
      {"tool_call arguments not JSON", K,
       R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c",
        "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]})",
       400, "messages[1].tool_calls[0].function.arguments"},
      {"unknown model", C, R"({"prompt": "x", "model": "gpt-9"})", 404, "model", "model_not_found"},
      {"model not string", C, R"({"prompt": "x", "model": 7})", 400, "model"},
      {"messages missing", K, R"({"model": "tiny"})", 400, "messages"},
      {"messages as string", K, R"({"messages": "hello"})", 400, "messages"},
      {"messages empty", K, R"({"messages": []})", 400, "messages"},
      {"messages [{}]", K, R"({"messages": [{}]})", 400, "messages[0].role"},
      {"message not object", K, R"({"messages": ["hi"]})", 400, "messages[0]"},
      {"unknown role", K, R"({"messages": [{"role": "wizard", "content": "x"}]})", 400, "messages[0].role"},
      {"role not string", K, R"({"messages": [{"role": 1, "content": "x"}]})", 400, "messages[0].role"},
      {"content missing", K, R"({"messages": [{"role": "user"}]})", 400, "messages[0].content"},
      {"content number", K, R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content"},
      {"image part", K, R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", 400,
       "messages[0].content[0].type"},
      {"part text missing", K, R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", 400,
       "messages[0].content[0].text"},
      {"template raises", K, R"({"messages": [{"role": "user", "content": "RAISE"}]})", 400, "messages"},
      {"chat over context", K, R"({"messages": [{"role": "user", "content": ")" + long_prompt + R"("}]})", 400,
       "messages", "context_length_exceeded"},
      {"chat max_tokens over context", K, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 60})", 400,
       "max_tokens", "context_length_exceeded"},
  };
  for (const BadCase& c : cases) {
    HttpResult r = Send(port_, "POST", c.target, c.body);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body;
    json body = r.Json();
    ASSERT_TRUE(body.is_object() && body.contains("error")) << c.name << ": " << r.body;
    const json& error = body["error"];
    EXPECT_TRUE(error["message"].is_string() && !error["message"].get<std::string>().empty()) << c.name;
    EXPECT_TRUE(error["type"].is_string()) << c.name;
    ASSERT_TRUE(error.contains("param") && error.contains("code")) << c.name;
    if (c.param == nullptr) {
      EXPECT_TRUE(error["param"].is_null()) << c.name << ": " << r.body;
    } else {
      EXPECT_EQ(error["param"], c.param) << c.name << ": " << r.body;
    }
    if (c.code != nullptr) {
      EXPECT_EQ(error["code"], c.code) << c.name;
    }
    EXPECT_TRUE(IsValidUtf8(r.body)) << c.name;
  }
  EXPECT_TRUE(engine_.submitted().empty());
  // Template errors carry the template's message.
  HttpResult r = Post(port_, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "RAISE"}}}}});
  EXPECT_NE(r.body.find("boom"), std::string::npos);
  // After all that the server still serves.
  EXPECT_EQ(Post(port_, "/v1/completions", {{"prompt", "ok"}}).status, 200);
}

TEST_F(HttpGuardTest, OversizedBodyIs413) {
  StartServer();
  const std::string big = R"({"prompt": ")" + std::string(100 << 10, 'a') + R"("})";
  HttpResult r = Send(port_, "POST", "/v1/completions", big);
  EXPECT_EQ(r.status, 413);
  EXPECT_TRUE(r.Json().contains("error"));
}

TEST_F(HttpGuardTest, HugeOrManyHeadersAre431) {
  StartServer();
  std::string raw = "GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20 << 10, 'a') + "\r\n\r\n";
  EXPECT_EQ(RawExchange(port_, raw).rfind("HTTP/1.1 431", 0), 0u);
  raw = "GET /health/live HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 150; ++i) raw += "X-H" + std::to_string(i) + ": v\r\n";
  raw += "\r\n";
  EXPECT_EQ(RawExchange(port_, raw).rfind("HTTP/1.1 431", 0), 0u);
}

TEST_F(HttpGuardTest, MalformedRequestLineIs400) {
  StartServer();
  EXPECT_EQ(RawExchange(port_, "GARBAGE\x01 / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
}

TEST_F(HttpGuardTest, SlowLorisIsCutByReadTimeout) {
  RouterConfig config = TestConfig();
  config.header_read_timeout_ms = 300;
  config.body_read_timeout_ms = 300;
  StartServer(config);
  const auto start = std::chrono::steady_clock::now();
  // A header that never ends: the server must close the connection.
  std::string got = RawExchange(port_, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-a: b", 5000);
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::milliseconds(3000));
  EXPECT_EQ(got.find("200"), std::string::npos);
  // A body that never completes, likewise.
  got = RawExchange(port_, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", 5000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(6000));
  EXPECT_TRUE(engine_.submitted().empty());
}

TEST_F(HttpGuardTest, ApiKeysMapToTenants) {
  RouterConfig config = TestConfig();
  config.api_keys = {{"key-alpha-123", "alpha"}, {"key-beta-4567", "beta"}};
  StartServer(config);
  json req = {{"prompt", "x"}};
  HttpResult r = Post(port_, "/v1/completions", req);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.Json()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(Post(port_, "/v1/completions", req, {{"Authorization", "Bearer nope-nope-nope"}}).status, 401);
  EXPECT_EQ(Post(port_, "/v1/completions", req, {{"Authorization", "key-alpha-123"}}).status, 401);
  EXPECT_EQ(Post(port_, "/v1/completions", req, {{"Authorization", "Bearer key-alpha-12"}}).status, 401);
  EXPECT_EQ(Send(port_, "GET", "/v1/models").status, 401);
  // The tokenizer endpoints, the model object and the version sit behind the same keys.
  EXPECT_EQ(Send(port_, "GET", "/v1/models/tiny").status, 401);
  EXPECT_EQ(Send(port_, "GET", "/version").status, 401);
  EXPECT_EQ(Post(port_, "/tokenize", {{"prompt", "x"}}).status, 401);
  EXPECT_EQ(Post(port_, "/detokenize", {{"tokens", {1}}}).status, 401);
  const Headers beta = {{"Authorization", "Bearer key-beta-4567"}};
  EXPECT_EQ(Send(port_, "GET", "/v1/models/tiny", "", beta).status, 200);
  EXPECT_EQ(Send(port_, "GET", "/version", "", beta).status, 200);
  EXPECT_EQ(Post(port_, "/tokenize", {{"prompt", "x"}}, beta).status, 200);
  EXPECT_EQ(Post(port_, "/detokenize", {{"tokens", {1}}}, beta).status, 200);
  EXPECT_EQ(Send(port_, "GET", "/health/live").status, 200);
  EXPECT_EQ(Send(port_, "GET", "/metrics").status, 200);
  ASSERT_EQ(Post(port_, "/v1/completions", req, {{"Authorization", "Bearer key-alpha-123"}}).status, 200);
  ASSERT_EQ(Post(port_, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}},
                 {{"Authorization", "bearer key-beta-4567"}})
                .status,
            200);
  EXPECT_EQ(Send(port_, "GET", "/v1/models", "", {{"Authorization", "Bearer key-beta-4567"}}).status, 200);
  auto submitted = engine_.submitted();
  ASSERT_EQ(submitted.size(), 2u);
  EXPECT_EQ(submitted[0].tenant_id, "alpha");
  EXPECT_EQ(submitted[1].tenant_id, "beta");
}

// The request's `priority` (else its key's, raised to the key's min_priority) picks
// the class: it reaches the engine, and a freed slot goes to queued interactive
// calls before batch ones that came earlier.
TEST_F(HttpGuardTest, PriorityOrdersTheQueueAndReachesTheEngine) {
  RouterConfig config = TestConfig();
  config.max_concurrent_requests = 1;
  config.api_keys = {{"key-alpha-123", "alpha"}, {"key-beta-4567", "beta", "2", "1"}};
  StartServer(config);
  const Headers alpha = {{"Authorization", "Bearer key-alpha-123"}};
  const Headers beta = {{"Authorization", "Bearer key-beta-4567"}};
  // The first request ("hold") holds the slot while the others queue.
  engine_.SetScriptFn([](const GenerateRequest& r) {
    Script script{{kWordBase}};
    if (r.prompt_token_ids.size() > 2) script.step_delay_ms = 500;
    return script;
  });
  std::vector<std::thread> clients;
  auto send = [&](json body, const Headers& key, int queued_after) {
    body["max_tokens"] = 1;
    clients.emplace_back([this, body, key] { EXPECT_EQ(Post(port_, "/v1/completions", body, key).status, 200); });
    for (int i = 0;
         i < 400 && static_cast<int>(engine_.submitted().size()) + server_->context().admission.queued() < queued_after;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  send({{"prompt", "hold"}}, alpha, 1);
  send({{"prompt", "b"}}, beta, 2);                     // the key's 2: batch
  send({{"prompt", "c"}, {"priority", -5}}, beta, 3);   // raised to the key's min_priority 1: batch
  send({{"prompt", "i"}, {"priority", -1}}, alpha, 4);  // interactive, after both
  send({{"prompt", "j"}, {"priority", 7}}, alpha, 5);   // the request's own: batch
  ASSERT_EQ(server_->context().admission.queued(), 4) << "the calls did not queue behind the first";
  for (std::thread& t : clients) t.join();
  std::vector<std::pair<TokenId, PriorityClass>> order;
  for (const GenerateRequest& r : engine_.submitted()) order.emplace_back(r.prompt_token_ids[1], r.priority);
  const std::vector<std::pair<TokenId, PriorityClass>> expected = {{'h', PriorityClass::kInteractive},
                                                                   {'i', PriorityClass::kInteractive},
                                                                   {'b', PriorityClass::kBatch},
                                                                   {'c', PriorityClass::kBatch},
                                                                   {'j', PriorityClass::kBatch}};
  EXPECT_EQ(order, expected);
}

TEST_F(HttpGuardTest, BackpressureAnswers429AndNotReady503) {
  RouterConfig config = TestConfig();
  config.max_concurrent_requests = 1;
  config.max_queued_requests = 1;
  config.max_queue_wait_ms = 300;
  config.retry_after_s = 2;
  StartServer(config);
  // Occupy the one slot with a slow request (3 steps of 400 ms).
  engine_.SetScript({{kWordBase}, 1, 0, -1, -1, /*step_delay_ms=*/400});
  std::thread holder([&] {
    EXPECT_EQ(Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}}).status, 200);
  });
  for (int i = 0; i < 200 && engine_.submitted().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(engine_.submitted().size(), 1u);
  // The next one queues and times out; meanwhile a third finds the queue full.
  std::thread queued([&] {
    auto start = std::chrono::steady_clock::now();
    HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}});
    EXPECT_EQ(r.status, 429);
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  });
  for (int i = 0; i < 200 && server_->context().admission.queued() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto start = std::chrono::steady_clock::now();
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers["retry-after"], "2");
  EXPECT_EQ(r.Json()["error"]["code"], "rate_limit_exceeded");
  queued.join();
  ready_ = false;
  r = Post(port_, "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "2");
  holder.join();
  EXPECT_EQ(server_->context().admission.running(), 0);
  EXPECT_EQ(MetricValue("tandem_requests_rejected_total{model_name=\"tiny\",reason=\"queue_full\"}"), 1);
  EXPECT_EQ(MetricValue("tandem_requests_rejected_total{model_name=\"tiny\",reason=\"overloaded\"}"), 1);
  EXPECT_EQ(MetricValue("tandem_requests_rejected_total{model_name=\"tiny\",reason=\"no_nodes\"}"), 1);
  EXPECT_EQ(engine_.submitted().size(), 1u);
}

// SIGTERM's drain: readiness says "draining", new requests get 503 with
// Retry-After, and the running one streams to its end before Drain returns.
TEST_F(HttpGuardTest, DrainFinishesRunningRequestsAndRefusesNewOnes) {
  RouterConfig config = TestConfig();
  config.retry_after_s = 3;
  StartServer(config);
  engine_.SetScript({{kWordBase}, 1, 0, -1, -1, /*step_delay_ms=*/150});  // 4 tokens: ~600 ms
  HttpResult running;
  std::thread holder([&] {
    running = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 4}, {"stream", true}});
  });
  for (int i = 0; i < 200 && engine_.submitted().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(engine_.submitted().size(), 1u);
  std::atomic<bool> drained{false};
  std::thread drainer([&] { drained = server_->Drain(std::chrono::seconds(10), nullptr); });
  for (int i = 0; i < 200 && !server_->context().draining.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  HttpResult ready = Send(port_, "GET", "/health/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.Json()["status"], "draining");
  HttpResult refused = Post(port_, "/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.headers["retry-after"], "3");
  EXPECT_NE(refused.body.find("draining"), std::string::npos) << refused.body;
  EXPECT_FALSE(drained.load()) << "Drain returned while a request was running";
  holder.join();
  drainer.join();
  EXPECT_TRUE(drained.load());
  ASSERT_EQ(running.status, 200);
  auto events = SseEvents(running.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(running.body.find("\"error\""), std::string::npos) << running.body;
  EXPECT_EQ(engine_.submitted().size(), 1u) << "the refused request reached the engine";
  EXPECT_TRUE(engine_.cancelled().empty());
  EXPECT_EQ(MetricValue("tandem_requests_rejected_total{model_name=\"tiny\",reason=\"draining\"}"), 1);
  // Past its deadline a drain gives up with the request still running.
  engine_.SetScript({{kWordBase}, 1, 0, -1, /*hold_after=*/1});
  server_->context().draining = false;
  std::thread held([&] { Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 9}}); });
  for (int i = 0; i < 200 && engine_.submitted().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(server_->Drain(std::chrono::milliseconds(200), nullptr));
  EXPECT_FALSE(server_->Drain(std::chrono::seconds(10), [] { return true; })) << "give_up ends it at once";
  server_->Stop();  // cancels the held request
  held.join();
}

TEST_F(HttpGuardTest, ClientDisconnectCancelsEngine) {
  StartServer();
  engine_.SetScript({{kWordBase}, 1, 0, -1, /*hold_after=*/2});
  for (bool stream : {true, false}) {
    const size_t before = engine_.submitted().size();
    {
      boost::asio::io_context ioc;
      auto socket = Connect(ioc, port_);
      const std::string body = json{{"prompt", "x"}, {"stream", stream}, {"max_tokens", 50}}.dump();
      const std::string raw =
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
          body;
      boost::asio::write(socket, boost::asio::buffer(raw));
      if (stream) {  // wait for the first bytes of the stream
        char buf[256];
        socket.read_some(boost::asio::buffer(buf));
      } else {
        for (int i = 0; i < 200 && engine_.submitted().size() == before; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    }  // socket closed here
    for (int i = 0; i < 200 && engine_.submitted().size() == before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(engine_.submitted().size(), before + 1);
    EXPECT_TRUE(engine_.WaitCancelled(engine_.submitted().back().request_id, 3000)) << "stream=" << stream;
  }
  for (int i = 0; i < 200 && server_->context().admission.running() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->context().admission.running(), 0);
  EXPECT_EQ(MetricValue("tandem_request_success_total{model_name=\"tiny\",finished_reason=\"abort\"}"), 2);
}

TEST_F(HttpGuardTest, RequestDeadlineEndsStuckRequests) {
  RouterConfig config = TestConfig();
  config.request_timeout_ms = 300;
  StartServer(config);
  engine_.SetScript({{kWordBase}, 1, 0, -1, /*hold_after=*/1});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 9}});
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(r.Json()["error"]["code"], "timeout");
  EXPECT_TRUE(engine_.WaitCancelled(engine_.submitted().at(0).request_id, 2000));
  r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 9}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  auto events = SseEvents(r.body);
  ASSERT_GE(events.size(), 3u);  // a text chunk, the error, [DONE]
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "Hello");
  EXPECT_EQ(json::parse(events[events.size() - 2])["error"]["code"], "timeout");
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_TRUE(engine_.WaitCancelled(engine_.submitted().at(1).request_id, 2000));
  EXPECT_EQ(server_->context().admission.running(), 0);
}

TEST_F(HttpGuardTest, Http10StreamHasNoChunkFramingAndCloses) {
  StartServer();
  const std::string body = json{{"prompt", "x"}, {"stream", true}}.dump();
  const std::string got = RawExchange(
      port_, "POST /v1/completions HTTP/1.0\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  ASSERT_EQ(got.rfind("HTTP/1.0 200", 0), 0u) << got;
  EXPECT_EQ(got.find("chunked"), std::string::npos);
  const std::string payload = got.substr(got.find("\r\n\r\n") + 4);
  EXPECT_EQ(payload.rfind("data: {", 0), 0u) << payload;
  EXPECT_EQ(payload.substr(payload.size() - 14), "data: [DONE]\n\n");
}

TEST_F(HttpGuardTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  std::string one = "GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string got = RawExchange(port_, one + one + "GET /health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  size_t count = 0;
  for (size_t pos = 0; (pos = got.find("HTTP/1.1 200", pos)) != std::string::npos; ++pos) ++count;
  EXPECT_EQ(count, 3u);
}

}  // namespace
}  // namespace tandem::router::testing
