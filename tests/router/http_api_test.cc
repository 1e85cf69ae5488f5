// OpenAI API behaviour over real loopback sockets: response shapes, usage,
// streaming, stop strings, UTF-8, n > 1, parameters reaching the engine.
#include <map>

#include "router/utf8_stream.h"
#include "tests/router/router_fixture.h"

namespace tandem::router::testing {
namespace {

using nlohmann::json;

const TokenId kHello = kWordBase, kWorld = kWordBase + 1;

class HttpApiTest : public RouterFixture {};

void ExpectUsage(const json& usage, int64_t prompt, int64_t completion, int64_t cached) {
  EXPECT_EQ(usage["prompt_tokens"], prompt);
  EXPECT_EQ(usage["completion_tokens"], completion);
  EXPECT_EQ(usage["total_tokens"], prompt + completion);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], cached);
}

TEST_F(HttpApiTest, CompletionNonStreaming) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}, 1, /*cached_tokens=*/2});
  HttpResult r = Post(port_, "/v1/completions", {{"model", "tiny"}, {"prompt", "hi"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_GT(body["created"].get<int64_t>(), 1600000000);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], "Hello world");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  // Prompt "hi" = BOS + 2 bytes; 3 sampled tokens including EOS.
  ExpectUsage(body["usage"], 3, 3, 2);
  ASSERT_EQ(engine_.submitted().size(), 1u);
  EXPECT_EQ(engine_.submitted()[0].prompt_token_ids, (std::vector<TokenId>{kBos, 'h', 'i'}));
  EXPECT_EQ(engine_.submitted()[0].max_tokens, 16);  // OpenAI's completions default
}

TEST_F(HttpApiTest, CompletionStreamingWithUsage) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}});
  HttpResult r = Post(port_, "/v1/completions",
                      {{"prompt", "hi"}, {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"].rfind("text/event-stream", 0), 0u);
  auto events = SseEvents(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::string finish;
  std::string id;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
    if (id.empty()) id = chunk["id"];
    EXPECT_EQ(chunk["id"], id);
    text += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "Hello world");
  EXPECT_EQ(finish, "stop");
  json usage_chunk = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  ExpectUsage(usage_chunk["usage"], 3, 3, 0);
}

TEST_F(HttpApiTest, ChatNonStreamingAndStreaming) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}});
  json request = {{"model", "tiny"},
                  {"messages",
                   {{{"role", "system"}, {"content", "be brief"}},
                    {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}}}};
  HttpResult r = Post(port_, "/v1/chat/completions", request);
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  EXPECT_EQ(body["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hello world");
  const std::string rendered = "<|system|>be brief\n<|user|>hi\n<|assistant|>";
  ExpectUsage(body["usage"], static_cast<int64_t>(rendered.size()), 3, 0);
  // Chat defaults max_tokens to the rest of the context.
  EXPECT_EQ(engine_.submitted()[0].max_tokens, kContext - static_cast<int32_t>(rendered.size()));

  request["stream"] = true;
  r = Post(port_, "/v1/chat/completions", request);
  ASSERT_EQ(r.status, 200);
  auto events = SseEvents(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(first.contains("usage"));  // no include_usage
  std::string content;
  std::string finish;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json chunk = json::parse(events[i]);
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Hello world");
  EXPECT_EQ(finish, "stop");
}

// The fake engine's logprobs (FakeLogprobs) in OpenAI's shapes: chat's content entries
// with token, logprob, bytes and top_logprobs; the completions' parallel lists with
// text offsets; a stream's chunks carry each token's entry exactly once.
TEST_F(HttpApiTest, LogprobsInChatAndCompletionShapes) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}, 1});
  const float lp_hello = FakeLogprobs(kHello, 0).logprob, lp_world = FakeLogprobs(kWorld, 0).logprob;
  const float lp_eos = FakeLogprobs(kEos, 0).logprob;
  json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"logprobs", true}, {"top_logprobs", 2}};
  HttpResult r = Post(port_, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(engine_.submitted().back().logprobs, 2);
  const json content = r.Json()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u) << content.dump();  // every sampled token, EOS included
  EXPECT_EQ(content[0]["token"], "Hello");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), lp_hello);
  EXPECT_EQ(content[0]["bytes"], json::array({72, 101, 108, 108, 111}));
  EXPECT_EQ(content[1]["token"], " world");
  EXPECT_FLOAT_EQ(content[1]["logprob"].get<float>(), lp_world);
  EXPECT_EQ(content[2]["token"], "<eos>");
  EXPECT_FLOAT_EQ(content[2]["logprob"].get<float>(), lp_eos);
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json::array({1}));  // token 1 is byte 0x01
  EXPECT_FLOAT_EQ(content[0]["top_logprobs"][1]["logprob"].get<float>(), -1.0f);

  chat["stream"] = true;
  r = Post(port_, "/v1/chat/completions", chat);
  ASSERT_EQ(r.status, 200);
  json streamed = json::array();
  for (const std::string& event : SseEvents(r.body)) {
    if (event == "[DONE]") continue;
    const json chunk = json::parse(event);
    const json& lp = chunk["choices"][0]["logprobs"];
    if (lp.is_null()) continue;  // the role chunk
    for (const json& entry : lp["content"]) streamed.push_back(entry);
  }
  EXPECT_EQ(streamed, content);

  json completion = {{"prompt", "hi"}, {"logprobs", 1}};
  r = Post(port_, "/v1/completions", completion);
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = r.Json()["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"Hello", " world", "<eos>"}));
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), lp_world);
  EXPECT_EQ(lp["text_offset"], json::array({0, 5, 11}));
  // One top entry (token 0, "\u0000"), plus the sampled token, as the legacy API adds it.
  ASSERT_EQ(lp["top_logprobs"][0].size(), 2u) << lp.dump();
  EXPECT_FLOAT_EQ(lp["top_logprobs"][0]["Hello"].get<float>(), lp_hello);
  completion["stream"] = true;
  r = Post(port_, "/v1/completions", completion);
  ASSERT_EQ(r.status, 200);
  json tokens = json::array(), offsets = json::array();
  for (const std::string& event : SseEvents(r.body)) {
    if (event == "[DONE]") continue;
    const json chunk = json::parse(event);
    const json& chunk_lp = chunk["choices"][0]["logprobs"];
    for (const json& t : chunk_lp["tokens"]) tokens.push_back(t);
    for (const json& o : chunk_lp["text_offset"]) offsets.push_back(o);
  }
  EXPECT_EQ(tokens, lp["tokens"]);
  EXPECT_EQ(offsets, lp["text_offset"]);

  // Without logprobs the field is null, and the engine is not asked for them.
  r = Post(port_, "/v1/completions", {{"prompt", "hi"}});
  EXPECT_TRUE(r.Json()["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(engine_.submitted().back().logprobs, -1);
}

// echo: the prompt text before the completion; with logprobs the prompt's tokens first (the
// first one's logprob and top null), from the engine's prompt logprobs; max_tokens 0 gives
// the prompt alone (the engine's one token dropped, no completion tokens), streamed or not.
TEST_F(HttpApiTest, EchoWithPromptLogprobs) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}, 1});
  json completion = {{"prompt", "hi"}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 2}};
  HttpResult r = Post(port_, "/v1/completions", completion);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(engine_.submitted().back().prompt_logprobs, 1);
  json choice = r.Json()["choices"][0];
  EXPECT_EQ(choice["text"], "hiHello world");
  const json lp = choice["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"<bos>", "h", "i", "Hello", " world"}));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), FakeLogprobs('h', 1).logprob);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][2].get<float>(), FakeLogprobs('i', 1).logprob);
  EXPECT_FLOAT_EQ(lp["token_logprobs"][3].get<float>(), FakeLogprobs(kHello, 1).logprob);
  EXPECT_EQ(lp["text_offset"], json::array({0, 5, 6, 7, 12}));
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 2);
  EXPECT_EQ(r.Json()["usage"]["prompt_tokens"], 3);

  // Streamed: the same tokens and text, the prompt's first.
  completion["stream"] = true;
  r = Post(port_, "/v1/completions", completion);
  ASSERT_EQ(r.status, 200);
  std::string text;
  json tokens = json::array();
  for (const std::string& event : SseEvents(r.body)) {
    if (event == "[DONE]") continue;
    const json chunk = json::parse(event);
    text += chunk["choices"][0]["text"].get<std::string>();
    if (chunk["choices"][0]["logprobs"].is_null()) continue;
    for (const json& t : chunk["choices"][0]["logprobs"]["tokens"]) tokens.push_back(t);
  }
  EXPECT_EQ(text, "hiHello world");
  EXPECT_EQ(tokens, lp["tokens"]);

  // max_tokens 0: the prompt alone.
  r = Post(port_, "/v1/completions", {{"prompt", "hi"}, {"echo", true}, {"logprobs", 0}, {"max_tokens", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  choice = r.Json()["choices"][0];
  EXPECT_EQ(choice["text"], "hi");
  EXPECT_EQ(choice["logprobs"]["tokens"], json::array({"<bos>", "h", "i"}));
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 0);
  EXPECT_EQ(engine_.submitted().back().max_tokens, 1);

  // Echo without logprobs asks the engine for none; a token-id prompt echoes its text.
  r = Post(port_, "/v1/completions", {{"prompt", json::array({'o', 'k'})}, {"echo", true}, {"max_tokens", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "okHello");
  EXPECT_EQ(engine_.submitted().back().prompt_logprobs, -1);

  // max_tokens 0 without echo, and echo on chat, are 400s naming the field.
  r = Post(port_, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 0}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["param"], "max_tokens");
  r = Post(port_, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"echo", true}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.Json()["error"]["param"], "echo");
}

// A node that ignores prompt logprobs (an older build) fails the request rather than
// answering without them.
TEST_F(HttpApiTest, EchoWithoutThePromptLogprobsFails) {
  StartServer();
  Script script{{kHello, kEos}, 1};
  script.drop_logprobs = true;
  engine_.SetScript(script);
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "hi"}, {"echo", true}, {"logprobs", 0}});
  EXPECT_EQ(r.status, 500) << r.body;
}

TEST_F(HttpApiTest, LogprobsStopAtTheTokenThatCompletesAStopString) {
  StartServer();
  engine_.SetScript({ByteTokens("abcSTOPdef"), 2});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"stop", "STOP"}, {"logprobs", 0}, {"max_tokens", 20}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = r.Json();
  EXPECT_EQ(body["choices"][0]["text"], "abc");
  // a b c S T O P: the seventh token completes the stop string; nothing after it.
  EXPECT_EQ(body["choices"][0]["logprobs"]["tokens"], json::array({"a", "b", "c", "S", "T", "O", "P"}));
}

TEST_F(HttpApiTest, LogitBiasReachesTheEngine) {
  StartServer();
  engine_.SetScript({{kHello, kEos}});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "hi"}, {"logit_bias", {{"7", -100}, {"12", 3.5}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<std::pair<TokenId, float>> sent = engine_.submitted().back().logit_bias;
  std::map<TokenId, float> bias(sent.begin(), sent.end());
  EXPECT_EQ(bias, (std::map<TokenId, float>{{7, -100.f}, {12, 3.5f}}));
}

// include_timing: the nodes' stage times (the fake's) and the router's own, in usage.timing
// and the server-timing header; without it, neither.
TEST_F(HttpApiTest, IncludeTimingShowsWhereTheTimeWent) {
  StartServer();
  Script script{{kHello, kWorld, kHello, kEos}, 1};
  script.step_delay_ms = 5;
  script.stage_times = NodeStageTimes{0.004, 0.010, 0.020, 0.003, 0.025};
  engine_.SetScript(script);
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "hi"}, {"include_timing", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(engine_.submitted().back().trace_timing);
  const json timing = r.Json()["usage"]["timing"];
  EXPECT_DOUBLE_EQ(timing["decode_queue"].get<double>(), 0.004);
  EXPECT_DOUBLE_EQ(timing["prefill_queue"].get<double>(), 0.010);
  EXPECT_DOUBLE_EQ(timing["prefill"].get<double>(), 0.020);
  EXPECT_DOUBLE_EQ(timing["kv_transfer"].get<double>(), 0.003);
  EXPECT_DOUBLE_EQ(timing["kv_wait"].get<double>(), 0.025);
  EXPECT_GE(timing["router_queue"].get<double>(), 0.0);
  // The fake sleeps 5 ms before each batch. Only the times from the request's start are bounded
  // below by the sleeps: a late first token shortens the gap to the second (seen under ASan).
  const double first_token = timing["first_token"].get<double>();
  const double first_decode_step = timing["first_decode_step"].get<double>();
  EXPECT_GE(first_token, 0.005);
  EXPECT_GE(first_decode_step, 0.0);
  EXPECT_GE(first_token + first_decode_step, 0.010);
  EXPECT_GE(first_token + first_decode_step + timing["decode"].get<double>(), 0.015);  // later batches
  EXPECT_GE(timing["total"].get<double>(), timing["first_token"].get<double>() + timing["first_decode_step"].get<double>() +
                                               timing["decode"].get<double>() - 1e-9);
  const std::string header = r.headers["server-timing"];
  for (const char* stage : {"router-queue;dur=", "decode-queue;dur=4.000", "prefill-queue;dur=10.000",
                            "prefill;dur=20.000", "kv-transfer;dur=3.000", "kv-wait;dur=25.000", "first-token;dur=",
                            "first-decode-step;dur=", "decode;dur=", "total;dur="}) {
    EXPECT_NE(header.find(stage), std::string::npos) << stage << " in " << header;
  }
  // A stream: the header with the head (what is known at the first token), usage.timing at the end.
  r = Post(port_, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
            {"include_timing", true},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers["server-timing"].find("prefill;dur=20.000"), std::string::npos) << r.headers["server-timing"];
  EXPECT_EQ(r.headers["server-timing"].find("total;dur="), std::string::npos) << "the total is not known at the head";
  auto events = SseEvents(r.body);
  ASSERT_GE(events.size(), 2u);
  const json usage_chunk = json::parse(events[events.size() - 2]);
  EXPECT_DOUBLE_EQ(usage_chunk["usage"]["timing"]["prefill"].get<double>(), 0.020);
  EXPECT_TRUE(usage_chunk["usage"]["timing"].contains("total"));
  // Not asked for: neither.
  r = Post(port_, "/v1/completions", {{"prompt", "hi"}});
  EXPECT_FALSE(r.Json()["usage"].contains("timing"));
  EXPECT_EQ(r.headers.count("server-timing"), 0u);
  EXPECT_FALSE(engine_.submitted().back().trace_timing);
  EXPECT_EQ(Post(port_, "/v1/completions", {{"prompt", "hi"}, {"include_timing", "yes"}}).status, 400);
}

TEST_F(HttpApiTest, StopStringAcrossTokenBoundariesIsNotEmitted) {
  StartServer();
  std::vector<TokenId> script = ByteTokens("abcSTOPdef");
  engine_.SetScript({script});
  for (bool stream : {false, true}) {
    HttpResult r = Post(port_, "/v1/completions",
                        {{"prompt", "x"},
                         {"stop", {"zz", "STOP"}},
                         {"max_tokens", 20},
                         {"stream", stream},
                         {"stream_options", {{"include_usage", true}}}});
    ASSERT_EQ(r.status, 200);
    std::string text, finish;
    json usage;
    if (stream) {
      for (const auto& e : SseEvents(r.body)) {
        if (e == "[DONE]") continue;
        json chunk = json::parse(e);
        if (!chunk["usage"].is_null()) usage = chunk["usage"];
        if (chunk["choices"].empty()) continue;
        text += chunk["choices"][0]["text"].get<std::string>();
        if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
      }
    } else {
      json body = r.Json();
      text = body["choices"][0]["text"];
      finish = body["choices"][0]["finish_reason"];
      usage = body["usage"];
    }
    EXPECT_EQ(text, "abc") << "stream=" << stream;
    EXPECT_EQ(finish, "stop");
    EXPECT_EQ(usage["completion_tokens"], 7);  // a b c S T O P
  }
  // Each request was cancelled at the engine once its stop string matched.
  for (const auto& req : engine_.submitted()) EXPECT_TRUE(engine_.WaitCancelled(req.request_id, 2000));
}

TEST_F(HttpApiTest, StopStringSpanningWordTokensAndHoldback) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"stop", "lo wor"}});
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hel");
  // A held-back possible prefix ("d!") that never completes is released at the end.
  engine_.SetScript({{kHello, kWorld, kEos}});
  r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"stop", "ld!"}, {"stream", true}});
  std::string text;
  for (const auto& e : SseEvents(r.body)) {
    if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello world");
}

TEST_F(HttpApiTest, StreamIsValidUtf8WhenTokensSplitCharacters) {
  StartServer();
  const std::string expected = "caf\xC3\xA9 \xF0\x9F\x98\x80!";
  std::vector<TokenId> script = ByteTokens(expected);
  script.push_back(kEos);
  engine_.SetScript({script});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"stream", true}, {"max_tokens", 30}});
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(IsValidUtf8(r.body));
  std::string text;
  for (const auto& e : SseEvents(r.body)) {
    if (e == "[DONE]") continue;
    std::string piece = json::parse(e)["choices"][0]["text"];
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "a partial character leaked";
    text += piece;
  }
  EXPECT_EQ(text, expected);
}

TEST_F(HttpApiTest, NChoicesAreIndependentSequences) {
  StartServer();
  engine_.SetScriptFn([](const GenerateRequest& req) {
    // A different word per seed, so every choice has its own text.
    return Script{{kWordBase + static_cast<TokenId>(*req.sampling.seed % 4), kEos}};
  });
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "hi"}, {"n", 3}, {"seed", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  ASSERT_EQ(body["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(body["choices"][i]["index"], i);
    EXPECT_EQ(body["choices"][i]["text"], kWords[i]);
  }
  ExpectUsage(body["usage"], 3, 6, 0);  // the prompt counts once
  auto submitted = engine_.submitted();
  ASSERT_EQ(submitted.size(), 3u);
  EXPECT_NE(submitted[0].request_id, submitted[1].request_id);
}

TEST_F(HttpApiTest, PromptListsAndTokenIds) {
  StartServer();
  engine_.SetScript({{kHello, kEos}});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", {{kHello, kWorld}, {7}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  ASSERT_EQ(body["choices"].size(), 2u);
  ExpectUsage(body["usage"], 3, 4, 0);
  r = Post(port_, "/v1/completions", {{"prompt", {"ab", "cde"}}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"].size(), 4u);
  ExpectUsage(r.Json()["usage"], 3 + 4, 8, 0);
  r = Post(port_, "/v1/completions", {{"prompt", {5, 6, 7}}});
  ASSERT_EQ(r.status, 200) << r.body;
  ExpectUsage(r.Json()["usage"], 3, 2, 0);
}

TEST_F(HttpApiTest, MaxTokensIgnoreEosAndSamplingReachEngine) {
  StartServer();
  engine_.SetScript({{kHello, kEos}});
  HttpResult r = Post(port_, "/v1/completions",
                      {{"prompt", "x"},
                       {"max_tokens", 5},
                       {"ignore_eos", true},
                       {"temperature", 0.5},
                       {"top_p", 0.9},
                       {"top_k", 7},
                       {"min_p", 0.1},
                       {"presence_penalty", 0.5},
                       {"frequency_penalty", -0.5},
                       {"repetition_penalty", 1.2},
                       {"seed", 42},
                       {"stop_token_ids", {5}},
                       {"min_tokens", 2},
                       {"some_unknown_field", {{"nested", true}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  EXPECT_EQ(body["choices"][0]["text"], "HelloHelloHello");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  GenerateRequest req = engine_.submitted().at(0);
  EXPECT_EQ(req.max_tokens, 5);
  EXPECT_TRUE(req.ignore_eos);
  EXPECT_FLOAT_EQ(req.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(req.sampling.top_p, 0.9f);
  EXPECT_EQ(req.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(req.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(req.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(req.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(req.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(req.sampling.seed, 42u);
  EXPECT_EQ(req.stop_token_ids, std::vector<TokenId>{5});
  EXPECT_EQ(req.min_tokens, 2);
  EXPECT_EQ(r.headers["x-tandem-ignored-fields"], "some_unknown_field");
  EXPECT_EQ(req.tenant_id, "default");
  EXPECT_GT(req.deadline_ns, 0);
  // max_completion_tokens is the chat spelling.
  r = Post(port_, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_completion_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(engine_.submitted().at(1).max_tokens, 2);
}

TEST_F(HttpApiTest, ModelsHealthMetrics) {
  StartServer();
  HttpResult r = Send(port_, "GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.Json()["object"], "list");
  EXPECT_EQ(r.Json()["data"][0]["id"], "tiny");
  EXPECT_EQ(r.Json()["data"][0]["object"], "model");
  EXPECT_EQ(Send(port_, "GET", "/health/live").status, 200);
  EXPECT_EQ(Send(port_, "GET", "/health/ready").status, 200);
  ready_ = false;
  r = Send(port_, "GET", "/health/ready");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(Send(port_, "GET", "/health/live").status, 200);
  r = Send(port_, "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("# TYPE tandem_num_requests_running gauge"), std::string::npos);
  EXPECT_EQ(r.headers["content-type"].rfind("text/plain", 0), 0u);
  EXPECT_EQ(Send(port_, "GET", "/nope").status, 404);
  EXPECT_EQ(Send(port_, "GET", "/v1/completions").status, 405);
}

TEST_F(HttpApiTest, MetricsCountRequestsTokensAndLatencies) {
  StartServer();
  engine_.SetScript({{kHello, kWorld, kEos}});
  ASSERT_EQ(Post(port_, "/v1/completions", {{"prompt", "hi"}}).status, 200);
  engine_.SetScript({{kHello}});
  ASSERT_EQ(Post(port_, "/v1/completions", {{"prompt", "abcd"}, {"max_tokens", 4}, {"n", 2}}).status, 200);
  // Every series carries the served model name.
  const std::string model = "{model_name=\"tiny\"}";
  EXPECT_EQ(MetricValue("tandem_request_success_total{model_name=\"tiny\",finished_reason=\"stop\"}"), 1);
  EXPECT_EQ(MetricValue("tandem_request_success_total{model_name=\"tiny\",finished_reason=\"length\"}"), 2);
  EXPECT_EQ(MetricValue("tandem_prompt_tokens_total" + model), 3 + 5);
  EXPECT_EQ(MetricValue("tandem_generation_tokens_total" + model), 3 + 8);
  EXPECT_EQ(MetricValue("tandem_time_to_first_token_seconds_count" + model), 2);
  EXPECT_EQ(MetricValue("tandem_e2e_request_latency_seconds_count" + model), 2);
  // One token per batch: every token after a choice's first is one gap (2 + 3 + 3).
  EXPECT_EQ(MetricValue("tandem_inter_token_latency_seconds_count" + model), 8);
  EXPECT_EQ(MetricValue("tandem_time_per_output_token_seconds_count" + model), 8);
  // Per request: both have more than one token per choice.
  EXPECT_EQ(MetricValue("tandem_request_time_per_output_token_seconds_count" + model), 2);
  EXPECT_EQ(MetricValue("tandem_request_prompt_tokens_count" + model), 2);
  EXPECT_EQ(MetricValue("tandem_request_prompt_tokens_sum" + model), 3 + 5);
  EXPECT_EQ(MetricValue("tandem_request_generation_tokens_sum" + model), 3 + 8);
  EXPECT_EQ(MetricValue("tandem_request_generation_tokens_bucket{model_name=\"tiny\",le=\"5\"}"), 1);
  EXPECT_EQ(MetricValue("tandem_request_generation_tokens_bucket{model_name=\"tiny\",le=\"10\"}"), 2);
  EXPECT_EQ(MetricValue("tandem_request_queue_time_seconds_count{model_name=\"tiny\",stage=\"router\"}"), 2);
  EXPECT_EQ(MetricValue("tandem_num_requests_running" + model), 0);
  EXPECT_EQ(MetricValue("tandem_num_requests_waiting" + model), 0);
}

TEST_F(HttpApiTest, EngineErrorsAreTerminalOutcomes) {
  StartServer();
  engine_.SetScript({{kHello}, 1, 0, /*fail_after=*/2});
  HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "1") << "every 503 says when to retry";
  EXPECT_EQ(r.Json()["error"]["type"], "server_error");
  r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  auto events = SseEvents(r.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  json error = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(error.contains("error")) << events[events.size() - 2];
}

// Before any output an engine refusal is its own HTTP status, streamed or not
// (400 for a request no KV pool can hold, 429 for no room); after output a
// ResourceExhausted is the server failing the request: 500 server_error, never
// rate_limit_error.
TEST_F(HttpApiTest, ErrorsBeforeOutputAreHttpStatusesAndAfterOutputServerErrors) {
  StartServer();
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "no stream");
    Script never_fits{{kHello}, 1, 0, /*fail_after=*/0};
    never_fits.fail_with = InvalidArgumentError("the request can never fit the KV pool");
    engine_.SetScript(never_fits);
    HttpResult r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}, {"stream", stream}});
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.Json()["error"]["type"], "invalid_request_error");
    EXPECT_EQ(r.Json()["error"]["message"], "the request can never fit the KV pool");

    Script no_room{{kHello}, 1, 0, /*fail_after=*/0};
    no_room.fail_with = ResourceExhaustedError("no room on any decode node");
    engine_.SetScript(no_room);
    r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}, {"stream", stream}});
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.Json()["error"]["type"], "rate_limit_error");
    EXPECT_FALSE(r.headers["retry-after"].empty());

    Script mid_stream{{kHello}, 1, 0, /*fail_after=*/2};
    mid_stream.fail_with = ResourceExhaustedError("KV blocks exhausted");
    engine_.SetScript(mid_stream);
    r = Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}, {"stream", stream}});
    json error;
    if (stream) {
      ASSERT_EQ(r.status, 200);
      auto events = SseEvents(r.body);
      ASSERT_GE(events.size(), 4u);  // two text chunks, the error, [DONE]
      EXPECT_EQ(events.back(), "[DONE]");
      error = json::parse(events[events.size() - 2]);
    } else {
      EXPECT_EQ(r.status, 500);
      error = r.Json();
    }
    EXPECT_EQ(error["error"]["type"], "server_error") << error.dump();
    EXPECT_TRUE(error["error"]["code"].is_null()) << error.dump();
  }
}

}  // namespace
}  // namespace tandem::router::testing
