// ClusterClient end to end through the real HTTP server: fake nodes register
// on the control port and answer Reserve/Prefill with scripted Tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/metrics/metrics_registry.h"
#include "router/cluster/cluster_client.h"
#include "router/http_server.h"
#include "tests/router/cluster/cluster_http_fixture.h"
#include "tests/router/cluster/fake_node.h"
#include "tests/router/fake_text_codec.h"
#include "tests/router/test_http_client.h"

namespace tandem::router::cluster {
namespace {

using nlohmann::json;
using router::testing::HttpResult;
using router::testing::kBos;
using router::testing::kEos;
using router::testing::kFakeVocab;
using router::testing::kWordBase;
using testing::FakeNode;
using testing::NodeScript;

constexpr TokenId kHello = kWordBase;      // "Hello"
constexpr TokenId kWorld = kWordBase + 1;  // " world"
// sha256("tandem-tenant:default"): the tenant of an open (keyless) router.
constexpr char kDefaultSalt[] = "42b770fc9a0bb0fce0dc774e999a3336dab4123b3111442207a924513a157820";

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class ClusterHttpTest : public testing::ClusterHttpFixture {
 protected:
  // POST {"prompt": "x", "max_tokens": 10, "priority": 1} (batch class) to /v1/completions;
  // once `started` holds and two tokens had time to stream, kill `doomed`; the response.
  HttpResult CompleteWhileKilling(FakeNode& doomed, const std::function<bool()>& started) {
    HttpResult result;
    std::thread client([&] {
      result = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}, {"priority", 1}});
    });
    EXPECT_TRUE(doomed.WaitFor(started));
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // two tokens streamed
    doomed.Kill();
    client.join();
    return result;
  }

  // Sends a streamed completion (max_tokens 50) on a new connection, returned open.
  boost::asio::ip::tcp::socket SendStreamRequest(boost::asio::io_context& ioc) {
    auto socket = router::testing::Connect(ioc, port_);
    const std::string body = json{{"prompt", "hello"}, {"stream", true}, {"max_tokens", 50}}.dump();
    const std::string raw =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
        body;
    boost::asio::write(socket, boost::asio::buffer(raw));
    return socket;
  }

  // Starts a streamed completion, reads its first bytes, and hangs up.
  void StartStreamAndHangUp() {
    boost::asio::io_context ioc;
    auto socket = SendStreamRequest(ioc);
    char buf[256];
    socket.read_some(boost::asio::buffer(buf));  // the stream began
  }
};

TEST_F(ClusterHttpTest, NotReadyWithoutDecodeNode) {
  Start();
  EXPECT_EQ(router::testing::Send(port_, "GET", "/health/ready", "").status, 503);
  EXPECT_EQ(router::testing::Post(port_, "/v1/completions", {{"prompt", "hi"}}).status, 503);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  (void)d;
  EXPECT_EQ(router::testing::Send(port_, "GET", "/health/ready", "").status, 200);
}

TEST_F(ClusterHttpTest, DisaggregatedNonStreamingUsageExact) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddPrefill(d);
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, /*cached=*/2});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hi"}, {"seed", 7}, {"min_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  EXPECT_EQ(body["choices"][0]["text"], "Hello world");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);  // BOS 'h' 'i'
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  // Reserve on decode carried the prompt, the tenant salt and epoch 1.
  ASSERT_EQ(d.reserves().size(), 1u);
  const proto::ReserveRequest reserve = d.reserves()[0];
  EXPECT_EQ(reserve.epoch(), 1u);
  EXPECT_EQ(reserve.prompt_len(), 3);
  EXPECT_EQ(std::vector<int32_t>(reserve.token_ids().begin(), reserve.token_ids().end()),
            (std::vector<int32_t>{kBos, 'h', 'i'}));
  EXPECT_EQ(reserve.tenant_salt(), kDefaultSalt);
  EXPECT_EQ(reserve.max_tokens(), 16);
  EXPECT_TRUE(reserve.sampling().has_seed());
  EXPECT_EQ(reserve.sampling().seed(), 7u);
  EXPECT_EQ(reserve.sampling().min_tokens(), 2);
  // Prefill got the request beside the Reserve, with decode's address, and the reservation
  // after it; decode got no local prefill.
  ASSERT_EQ(p.prefills().size(), 1u);
  const proto::PrefillRequest prefill = p.prefills()[0];
  EXPECT_TRUE(prefill.reservation_follows());
  EXPECT_EQ(prefill.epoch(), 1u);
  ASSERT_EQ(p.targets().size(), 1u);
  EXPECT_EQ(p.targets()[0].request_id(), prefill.request_id());
  EXPECT_EQ(p.targets()[0].epoch(), 1u);
  EXPECT_EQ(p.targets()[0].reservation().needed_runs_size(), 1);
  EXPECT_EQ(p.targets()[0].reservation().transport_descriptor(), "fake-target");
  EXPECT_EQ(prefill.decode_address(), d.address());
  EXPECT_EQ(prefill.tenant_salt(), kDefaultSalt);
  EXPECT_EQ(prefill.sampling().min_tokens(), 2);
  EXPECT_TRUE(d.prefills().empty());
  EXPECT_EQ(engine_->num_inflight(), 0u);
}

TEST_F(ClusterHttpTest, StreamingChatWithUsage) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddPrefill(d);
  d.SetScript({{kHello, kWorld, '!', kWorld}, proto::FINISH_REASON_LENGTH, /*cached=*/16});
  HttpResult r = router::testing::Post(port_, "/v1/chat/completions",
                                       {{"messages", json::array({{{"role", "user"}, {"content", "hey"}}})},
                                        {"max_tokens", 4},
                                        {"stream", true},
                                        {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::string text;
  json usage;
  std::string finish;
  for (const std::string& e : router::testing::SseEvents(r.body)) {
    if (e == "[DONE]") continue;
    json chunk = json::parse(e);
    ASSERT_FALSE(chunk.contains("error")) << e;
    if (!chunk["usage"].is_null()) usage = chunk["usage"];
    for (const auto& c : chunk["choices"]) {
      if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    }
  }
  EXPECT_EQ(text, "Hello world! world");
  EXPECT_EQ(finish, "length");
  const std::string rendered = "<|user|>hey\n<|assistant|>";
  EXPECT_EQ(usage["prompt_tokens"], static_cast<int>(rendered.size()));
  EXPECT_EQ(usage["completion_tokens"], 4);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 16);
}

TEST_F(ClusterHttpTest, ShortPromptsAndColocatedModeUseTheLocalPath) {
  ClusterConfig config;
  config.local_prefill_max_tokens = 3;
  Start(config);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddPrefill(d);
  d.SetScript({{kHello, kEos}});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hi"}});  // 3 tokens
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello");
  EXPECT_TRUE(d.reserves().empty());
  ASSERT_EQ(d.prefills().size(), 1u);
  EXPECT_FALSE(d.prefills()[0].has_reservation());
  EXPECT_EQ(d.prefills()[0].epoch(), 1u);
  EXPECT_EQ(d.prefills()[0].tenant_salt(), kDefaultSalt);
  EXPECT_TRUE(p.prefills().empty());
  // A longer prompt goes through the prefill node.
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(d.reserves().size(), 1u);
  EXPECT_EQ(p.prefills().size(), 1u);
}

TEST_F(ClusterHttpTest, ColocatedModeNeverReserves) {
  ClusterConfig config;
  config.mode = ServingMode::kColocated;
  Start(config);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddPrefill(d);
  d.SetScript({{kHello, kEos}});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "a long enough prompt"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(d.reserves().empty());
  EXPECT_EQ(d.prefills().size(), 1u);
  EXPECT_TRUE(p.prefills().empty());
}

// A mixed pool in disaggregated mode: a colocated replica beside a P/D pair. Whichever
// decode-serving node placement picks decides the path: the P/D pair's decode node reserves
// and the prefill node computes; the colocated node prefills its requests itself.
TEST_F(ClusterHttpTest, MixedPoolColocatedReplicaPrefillsItsOwnRequests) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0", /*free_blocks=*/1000);
  FakeNode& c = AddNode(proto::NODE_ROLE_COLOCATED, "c0", /*free_blocks=*/100);
  FakeNode& p = AddPrefill(d);
  d.SetScript({{kHello, kEos}});
  c.SetScript({{kWorld, kEos}});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "a long enough prompt"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello");
  EXPECT_EQ(d.reserves().size(), 1u);
  EXPECT_EQ(p.prefills().size(), 1u);
  EXPECT_TRUE(c.prefills().empty() && c.reserves().empty());

  d.SetRefuseAsDraining(true);  // the next request is placed again, on the colocated node
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", "a long enough prompt"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], " world");
  EXPECT_TRUE(c.reserves().empty());
  ASSERT_EQ(c.prefills().size(), 1u);
  EXPECT_FALSE(c.prefills()[0].has_reservation());
  EXPECT_EQ(c.prefills()[0].epoch(), 2u);
  // The prefill node had it beside the refused Reserve: cancelled, never given a reservation.
  ASSERT_EQ(p.prefills().size(), 2u);
  EXPECT_EQ(p.targets().size(), 1u);
  ASSERT_TRUE(p.WaitFor([&] { return !p.cancels().empty(); }));
  EXPECT_EQ(p.cancels().back().request_id(), p.prefills()[1].request_id());
  EXPECT_EQ(p.cancels().back().epoch(), 1u);
}

TEST_F(ClusterHttpTest, FallsBackToLocalPathWhenPrefillRefuses) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddPrefill(d);
  p.SetRefusePrefill(true);
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello world");
  // Refused beside the Reserve; if that answer came before decode's, the router asked the
  // prefill pool once more after the reservation (refused again) before prefilling on decode.
  EXPECT_GE(p.prefills().size(), 1u);
  EXPECT_LE(p.prefills().size(), 2u);
  // The reservation (epoch 1) was released, and the local prefill ran as epoch 2.
  ASSERT_EQ(d.releases().size(), 1u);
  EXPECT_EQ(d.releases()[0].epoch(), 1u);
  ASSERT_GE(d.prefills().size(), 1u);
  EXPECT_EQ(d.prefills().back().epoch(), 2u);
  EXPECT_FALSE(d.prefills().back().has_reservation());
}

// A prefill node that refuses the PrefillRequest sent beside the Reserve (its queue full)
// holds nothing: the router asks it again once decode has reserved, at the same epoch and
// without a Cancel in between (a Cancel of an epoch a node does not hold makes it refuse
// that epoch when it comes), and the prompt is computed there, not on decode.
TEST_F(ClusterHttpTest, PrefillRefusedBesideTheReserveIsAskedAgainAfterIt) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddPrefill(d);
  p.RefusePrefills(1);
  d.SetReserveDelayMs(200);  // the refusal comes first
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello world");
  std::vector<proto::PrefillRequest> asks = p.prefills();
  ASSERT_EQ(asks.size(), 2u);
  EXPECT_TRUE(asks[0].reservation_follows());
  EXPECT_FALSE(asks[1].reservation_follows());
  EXPECT_EQ(asks[1].epoch(), 1u);
  EXPECT_TRUE(asks[1].has_reservation());
  EXPECT_TRUE(p.cancels().empty());
  EXPECT_TRUE(d.prefills().empty()) << "the prompt was computed on decode";
  EXPECT_TRUE(d.releases().empty());
}

// A decode node without room (full batch) refuses the reservation: the router places the
// request again with backoff, at a new epoch, until there is room; past no_room_retry_ms
// the client gets 429 with Retry-After.
TEST_F(ClusterHttpTest, NoRoomOnDecodeIsRetriedThen429) {
  ClusterConfig config;
  config.no_room_retry_ms = 300;
  Start(config);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddPrefill(d);
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0});
  d.RefuseForNoRoom(3);
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello world");
  std::vector<proto::ReserveRequest> reserves = d.reserves();
  ASSERT_EQ(reserves.size(), 4u);
  for (size_t i = 0; i < reserves.size(); ++i) EXPECT_EQ(reserves[i].epoch(), i + 1) << "a new epoch per try";

  d.RefuseForNoRoom(1 << 20);
  const auto start = std::chrono::steady_clock::now();
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(r.Json()["error"]["type"], "rate_limit_error");
  EXPECT_GE(waited, std::chrono::milliseconds(300)) << "answered before no_room_retry_ms";
  EXPECT_GT(d.reserves().size(), 6u) << "retried with backoff meanwhile";
  for (const NodeView& v : engine_->registry().Views()) {
    EXPECT_EQ(v.router_inflight, 0) << "node " << v.node_id << ": the retries left an in-flight count";
  }
}

// Room on the decode pool goes to the requests waiting for it in order — the more urgent
// class first, then arrival — and a request keeps its place until it has room: while one
// waits (or tries), those behind it send nothing, newcomers included.
TEST_F(ClusterHttpTest, RoomGoesToTheMostUrgentWaiterThenTheOldest) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddPrefill(d);
  d.SetScript({{kHello, kEos}, proto::FINISH_REASON_STOP, 0});
  d.RefuseForNoRoom(1 << 20);
  auto tries = [&](char prompt) {  // the Reserves of the request whose prompt is `prompt`
    std::vector<size_t> at;
    const std::vector<proto::ReserveRequest> reserves = d.reserves();
    for (size_t i = 0; i < reserves.size(); ++i) {
      if (reserves[i].token_ids_size() > 1 && reserves[i].token_ids(1) == prompt) at.push_back(i);
    }
    return at;
  };
  std::vector<HttpResult> results(3);
  std::vector<std::thread> clients;
  auto send = [&](size_t i, const char* prompt, int priority) {
    clients.emplace_back([&, i, prompt, priority] {
      results[i] = router::testing::Post(port_, "/v1/completions", {{"prompt", prompt}, {"priority", priority}});
    });
  };
  send(0, "a", 1);  // batch: refused, first in the queue, it tries again on its backoff
  ASSERT_TRUE(d.WaitFor([&] { return tries('a').size() >= 2; }));
  send(1, "b", 1);  // batch, behind a: held back without a Reserve
  ASSERT_TRUE(d.WaitFor([&] {
    return registry_.RenderText().find("tandem_router_pool_waiting_for_room{pool=\"decode\"} 2") != std::string::npos;
  }));
  send(2, "c", 0);  // interactive: ahead of both
  ASSERT_TRUE(d.WaitFor([&] { return tries('c').size() >= 2; }));
  const size_t a_tries = tries('a').size();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(tries('a').size(), a_tries) << "a tried while c waited ahead of it";
  EXPECT_EQ(tries('b').size(), 0u) << "b tried while a waited ahead of it";
  EXPECT_GT(tries('c').size(), 2u) << "the first in the queue tries on its backoff";
  EXPECT_NE(registry_.RenderText().find("tandem_router_pool_waiting_for_room{pool=\"decode\"} 3"), std::string::npos);

  d.RefuseForNoRoom(0);
  for (std::thread& t : clients) t.join();
  for (const HttpResult& r : results) EXPECT_EQ(r.status, 200) << r.body;
  // Each one's last Reserve got the room: c's, then a's, then b's (its only one).
  ASSERT_EQ(tries('b').size(), 1u);
  EXPECT_LT(tries('c').back(), tries('a').back());
  EXPECT_LT(tries('a').back(), tries('b').back());
  ASSERT_TRUE(d.WaitFor([&] {
    return registry_.RenderText().find("tandem_router_pool_waiting_for_room{pool=\"decode\"} 0") != std::string::npos;
  }));
}

TEST_F(ClusterHttpTest, WholePromptCachedReleasesAndGoesLocal) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& p = AddPrefill(d);
  d.SetReserveNeedsNothing(true);
  d.SetScript({{kHello, kEos}, proto::FINISH_REASON_STOP, 5});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["usage"]["prompt_tokens_details"]["cached_tokens"], 5);
  // Nothing to transfer: the prefill beside the Reserve is cancelled, never given a target.
  EXPECT_TRUE(p.targets().empty());
  // (Its Ack may come back after the request moved on: a second Cancel of that epoch follows.)
  ASSERT_TRUE(p.WaitFor([&] { return !p.cancels().empty() && p.cancels().size() >= p.prefills().size(); }));
  for (const proto::Cancel& c : p.cancels()) EXPECT_EQ(c.epoch(), p.prefills()[0].epoch());
  EXPECT_EQ(d.releases().size(), 1u);
  EXPECT_EQ(d.prefills().back().epoch(), 2u);
}

TEST_F(ClusterHttpTest, DecodeDeathMidStreamEndsWithErrorAndStopsRouting) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddPrefill(d);
  d.SetScript({{kHello, kWorld, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/2});
  HttpResult result;
  std::thread client([&] {
    result = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}, {"stream", true}});
  });
  ASSERT_TRUE(d.WaitFor([&] { return !d.prefills().empty() || !d.reserves().empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // two tokens streamed
  const auto killed = std::chrono::steady_clock::now();
  d.Kill();
  client.join();
  EXPECT_LT(Seconds(killed), 5.0);
  ASSERT_EQ(result.status, 200);
  const std::vector<std::string> events = router::testing::SseEvents(result.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  json last = json::parse(events[events.size() - 2]);
  ASSERT_TRUE(last.contains("error")) << result.body;
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello world");  // the two tokens streamed before the death
  // Not routed to any more: the router is not ready and answers 503.
  EXPECT_EQ(router::testing::Send(port_, "GET", "/health/ready", "").status, 503);
  EXPECT_EQ(engine_->num_inflight(), 0u);
}

// A node that stops talking is dead after node_dead_after_ms (short here; 10 s by default).
TEST_F(ClusterHttpTest, SilentDecodeIsDeadAfterItsSilenceAndItsRequestMovesOn) {
  ClusterConfig config;
  config.node_dead_after_ms = 300;
  Start(config);
  FakeNode& quiet = AddNode(proto::NODE_ROLE_DECODE, "d-quiet", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  quiet.SetLoad(0, 0, 1000, 0);
  other.SetLoad(0, 0, 10, 0);
  quiet.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/1});
  other.SetScript({{kWorld, kEos}, proto::FINISH_REASON_STOP, /*cached=*/2});
  HttpResult moved;
  std::thread client([&] {
    moved = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}, {"stream", true}, {"min_tokens", 2}});
  });
  ASSERT_TRUE(quiet.WaitFor([&] { return !quiet.prefills().empty(); }));  // no prefill node: local path
  std::this_thread::sleep_for(std::chrono::milliseconds(30));             // "Hello" streamed
  const auto silent = std::chrono::steady_clock::now();
  quiet.StopHeartbeats();
  ASSERT_TRUE(other.WaitFor([&] { return !other.prefills().empty(); }, 5000));
  const double took = Seconds(silent);
  EXPECT_LT(took, 3.0);  // 300 ms + sweep
  EXPECT_GE(took, 0.2);  // not before 300 ms since the last heartbeat (100 ms apart)
  client.join();
  // The request continued on the other node: prompt + the token so far, epoch 2.
  std::string text;
  for (const std::string& e : router::testing::SseEvents(moved.body)) {
    if (e == "[DONE]") continue;
    json chunk = json::parse(e);
    ASSERT_FALSE(chunk.contains("error")) << moved.body;
    text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Hello world");
  const proto::PrefillRequest continued = other.prefills()[0];
  EXPECT_EQ(continued.epoch(), 2u);
  EXPECT_EQ(std::vector<int32_t>(continued.token_ids().begin(), continued.token_ids().end()),
            (std::vector<int32_t>{kBos, 'x', kHello}));
  EXPECT_EQ(continued.sampling().max_tokens(), 15);                  // 16 - 1 already generated
  EXPECT_EQ(continued.sampling().num_output_tokens_in_prompt(), 1);  // kHello samples as output
  EXPECT_EQ(continued.sampling().min_tokens(), 2);                   // counting kHello too
  // New work goes to the other node only.
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], " world");
  EXPECT_EQ(quiet.prefills().size(), 1u);
  EXPECT_EQ(other.prefills().size(), 2u);
}

TEST_F(ClusterHttpTest, KilledDecodeRequestContinuesElsewhereWithExactUsage) {
  Start();
  FakeNode& doomed = AddNode(proto::NODE_ROLE_DECODE, "d-doomed", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  doomed.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/2});
  other.SetScript({{'!', kEos}, proto::FINISH_REASON_STOP, /*cached=*/5});  // prompt+generated cached
  HttpResult result = CompleteWhileKilling(doomed, [&] { return !doomed.prefills().empty(); });
  ASSERT_EQ(result.status, 200) << result.body;
  json body = result.Json();
  EXPECT_EQ(body["choices"][0]["text"], "Hello world!");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(body["usage"]["completion_tokens"], 4);
  // Cached tokens never exceed the client's prompt.
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  ASSERT_EQ(other.prefills().size(), 1u);
  EXPECT_EQ(other.prefills()[0].sampling().max_tokens(), 8);
  EXPECT_EQ(other.prefills()[0].sampling().num_output_tokens_in_prompt(), 2);  // Hello, world
  EXPECT_EQ(other.prefills()[0].priority(), proto::REQUEST_PRIORITY_BATCH) << "the moved request lost its class";
}

// The decode node dies while a prefill node still computes the prompt for it: the request
// moves to the other decode node (local path), the prefill node is told to stop, and the
// router no longer counts that prompt as queued there.
TEST_F(ClusterHttpTest, DecodeDeathDuringRemotePrefillFreesThePrefillNode) {
  Start();
  FakeNode& doomed = AddNode(proto::NODE_ROLE_DECODE, "d-doomed", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  FakeNode& prefill = AddNode(proto::NODE_ROLE_PREFILL, "p0");  // acks and holds
  other.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP});
  auto queued_on_prefill = [&] {
    for (const NodeView& v : engine_->registry().Views()) {
      if (v.node_id == prefill.node_id()) return v.router_prefill_tokens;
    }
    return int64_t{-1};
  };
  HttpResult result = CompleteWhileKilling(doomed, [&] { return !prefill.prefills().empty(); });
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.Json()["choices"][0]["text"], "Hello world");
  ASSERT_EQ(other.prefills().size(), 1u);
  ASSERT_TRUE(prefill.WaitFor([&] { return !prefill.cancels().empty(); }, 3000)) << "the prefill was not cancelled";
  EXPECT_EQ(prefill.cancels()[0].request_id(), prefill.prefills()[0].request_id());
  EXPECT_EQ(prefill.cancels()[0].epoch(), prefill.prefills()[0].epoch());
  EXPECT_EQ(queued_on_prefill(), 0);
}

// The node a request moves to after a decode death has no room at first: the request
// stays on the local path (prompt + tokens so far) while it is placed again.
TEST_F(ClusterHttpTest, MovedRequestRetriedForRoomKeepsItsTokens) {
  Start();
  FakeNode& doomed = AddNode(proto::NODE_ROLE_DECODE, "d-doomed", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  FakeNode& prefill = AddNode(proto::NODE_ROLE_PREFILL, "p0");
  prefill.on_prefill = [&](const proto::PrefillRequest& req) {
    (req.decode_address() == doomed.address() ? doomed : other).StartStream(req.request_id(), req.epoch());
  };
  doomed.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/2});
  other.SetScript({{'!', kEos}, proto::FINISH_REASON_STOP, 0});
  other.RefuseForNoRoom(2);
  HttpResult result = CompleteWhileKilling(doomed, [&] { return !prefill.prefills().empty(); });
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.Json()["choices"][0]["text"], "Hello world!");
  EXPECT_EQ(result.Json()["usage"]["completion_tokens"], 4);
  ASSERT_EQ(doomed.reserves().size(), 1u) << "the first placement went through the prefill node";
  EXPECT_EQ(doomed.reserves()[0].priority(), proto::REQUEST_PRIORITY_BATCH);
  EXPECT_EQ(prefill.prefills()[0].priority(), proto::REQUEST_PRIORITY_BATCH);
  EXPECT_TRUE(other.reserves().empty()) << "a retry for room left the local path";
  const std::vector<proto::PrefillRequest> tries = other.prefills();
  ASSERT_EQ(tries.size(), 3u);
  for (size_t i = 0; i < tries.size(); ++i) {
    EXPECT_FALSE(tries[i].has_reservation()) << "try " << i << " left the local path";
    EXPECT_EQ(tries[i].token_ids_size(), 4) << "try " << i << ": prompt + the two tokens so far";
    EXPECT_EQ(tries[i].sampling().max_tokens(), 8);
    EXPECT_EQ(tries[i].priority(), proto::REQUEST_PRIORITY_BATCH);
    if (i > 0) {
      EXPECT_GT(tries[i].epoch(), tries[i - 1].epoch());
    }
  }
}

// A request that waited for room and got it leaves the room queue with its first tokens,
// even when the Ack of its PrefillRequest never comes back in time (a timeout after the
// stream began, which the request ignores): the requests behind it are not held back for
// the rest of its stream.
TEST_F(ClusterHttpTest, FirstTokensEndAWaitForRoomWhoseAckWentAstray) {
  ClusterConfig config;
  config.node_call_timeout_ms = 150;
  Start(config);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  std::vector<TokenId> tokens(30, kHello);
  tokens.push_back(kEos);
  d.SetScript({tokens, proto::FINISH_REASON_STOP, 0, /*hold_after=*/-1, /*step_ms=*/40});
  d.RefuseForNoRoom(1);                    // the first ask: no room, it waits
  d.SetLocalAckDelayMs(500, /*count=*/1);  // the second: streams at once, its Ack too late
  std::atomic<bool> first_done{false};
  std::thread first([&] {
    HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 40}});
    EXPECT_EQ(r.status, 200) << r.body;
    first_done = true;
  });
  EXPECT_TRUE(d.WaitFor([&] { return d.prefills().size() >= 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // past the call's timeout
  std::thread second([&] {
    HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "b"}, {"max_tokens", 1}});
    EXPECT_EQ(r.status, 200) << r.body;
  });
  EXPECT_TRUE(d.WaitFor([&] { return d.prefills().size() >= 3; }, 600)) << "the second was held back";
  EXPECT_FALSE(first_done.load()) << "the first ended before the second was asked for";
  first.join();
  second.join();
}

// The client leaves while the decode node's Ack of the local PrefillRequest is still on
// its way (as when the router's Cancel overtakes the request): the router's first Cancel
// may have found nothing at the node, so the late Ack gets a second one.
TEST_F(ClusterHttpTest, LateAckOfAnEndedRequestIsCancelledAgain) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/1});
  d.SetLocalAckDelayMs(300);
  StartStreamAndHangUp();  // the Ack is still delayed when the client leaves
  ASSERT_TRUE(d.WaitFor([&] { return d.cancels().size() >= 2; }, 3000)) << d.cancels().size() << " cancels";
  const std::vector<proto::Cancel> cancels = d.cancels();
  EXPECT_EQ(cancels[0].request_id(), cancels[1].request_id());
  EXPECT_EQ(cancels[0].epoch(), cancels[1].epoch());
  EXPECT_EQ(d.prefills().size(), 1u);
}

// The decode node dies while the Ack of its local PrefillRequest is still in flight: the
// request moves to the other decode node (F1) instead of ending with the failed call's
// Unavailable (the connection runs on_close, which moves it, before failing its calls).
TEST_F(ClusterHttpTest, DecodeDeathWithItsAckPendingMovesTheRequest) {
  Start();
  FakeNode& doomed = AddNode(proto::NODE_ROLE_DECODE, "d-doomed", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  doomed.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/0});
  doomed.SetLocalAckDelayMs(2000);
  other.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP});
  HttpResult result = CompleteWhileKilling(doomed, [&] { return !doomed.prefills().empty(); });
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.Json()["choices"][0]["text"], "Hello world");
  ASSERT_EQ(other.prefills().size(), 1u);
  EXPECT_GT(other.prefills()[0].epoch(), doomed.prefills()[0].epoch());
}

// The decode node's Ack of a local PrefillRequest comes after the router's call timeout, and
// retries are off: the request fails, and the node, which may run it all the same, is told
// to cancel it.
TEST_F(ClusterHttpTest, TimedOutLocalPrefillIsCancelledOnTheNode) {
  ClusterConfig config;
  config.node_call_timeout_ms = 200;
  config.no_room_retry_ms = 0;
  Start(config);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/0});
  d.SetLocalAckDelayMs(600);
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 5}});
  EXPECT_NE(r.status, 200) << r.body;
  ASSERT_TRUE(d.WaitFor([&] { return !d.cancels().empty(); }, 3000)) << "no Cancel after the timeout";
  ASSERT_EQ(d.prefills().size(), 1u);
  EXPECT_EQ(d.cancels()[0].request_id(), d.prefills()[0].request_id());
  EXPECT_EQ(d.cancels()[0].epoch(), d.prefills()[0].epoch());
}

// With retries on (the default), a timed-out call places the request again on another node;
// the slow node is told to cancel the epoch that timed out.
// The only decode node answered too late once: it is avoided, not dead. The timed-out
// request is placed on it again, and a new request meanwhile is served there, not
// refused with "no live decode node".
TEST_F(ClusterHttpTest, TheOnlyDecodeNodeServesOnAfterATimedOutCall) {
  ClusterConfig config;
  config.node_call_timeout_ms = 400;
  Start(config);
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/-1, /*step_ms=*/600});
  d.SetLocalAckDelayMs(1200, /*count=*/1);  // the first call answers after the router gave up on it
  std::thread first([&] {
    HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 5}});
    EXPECT_EQ(r.status, 200) << r.body;
  });
  ASSERT_TRUE(d.WaitFor([&] { return !d.cancels().empty(); }, 3000)) << "the call never timed out";
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "y"}, {"max_tokens", 5}});
  EXPECT_EQ(r.status, 200) << r.body;
  first.join();
  EXPECT_GE(d.prefills().size(), 3u);  // the first request twice (epochs 1 and 2), the second once
  EXPECT_EQ(engine_->registry().Counts().decode, 1);
}

TEST_F(ClusterHttpTest, TimedOutLocalPrefillIsPlacedAgainElsewhere) {
  ClusterConfig config;
  config.node_call_timeout_ms = 200;
  Start(config);
  FakeNode& slow = AddNode(proto::NODE_ROLE_DECODE, "d-slow", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  slow.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/0});
  slow.SetLocalAckDelayMs(600);
  other.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello world");
  ASSERT_EQ(slow.prefills().size(), 1u);
  ASSERT_EQ(other.prefills().size(), 1u);
  EXPECT_EQ(other.prefills()[0].epoch(), 2u);
  ASSERT_TRUE(slow.WaitFor([&] { return !slow.cancels().empty(); }, 3000));
  EXPECT_EQ(slow.cancels()[0].epoch(), 1u);
}

// A decode node that began draining refuses new work (Unavailable "draining") before its
// heartbeat says so: the request is placed again on the other decode node at a new epoch
// (issue 27: drain moves work). With no other decode node it ends with 503 at once.
TEST_F(ClusterHttpTest, RefusalByADrainingNodeIsPlacedAgainElsewhere) {
  Start();
  FakeNode& draining = AddNode(proto::NODE_ROLE_DECODE, "d-draining", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  FakeNode& prefill = AddNode(proto::NODE_ROLE_PREFILL, "p0");
  prefill.on_prefill = [&](const proto::PrefillRequest& req) {
    (req.decode_address() == draining.address() ? draining : other).StartStream(req.request_id(), req.epoch());
  };
  draining.SetRefuseAsDraining(true);
  other.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP});
  HttpResult r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello world");
  ASSERT_EQ(draining.reserves().size(), 1u);
  EXPECT_EQ(draining.reserves()[0].epoch(), 1u);
  ASSERT_EQ(other.reserves().size(), 1u);
  EXPECT_EQ(other.reserves()[0].epoch(), 2u);
  for (const NodeView& v : engine_->registry().Views()) {
    EXPECT_EQ(v.router_inflight, 0) << "node " << v.node_id;
  }

  other.Kill();
  ASSERT_TRUE(draining.WaitFor([&] { return engine_->registry().Views().size() == 2; }));
  r = router::testing::Post(port_, "/v1/completions", {{"prompt", "hello"}});
  EXPECT_EQ(r.status, 503) << r.body;
}

// A decode node whose heartbeat says it is draining keeps the stream it has begun; a
// request it holds without a token yet is cancelled there and placed on the other node.
TEST_F(ClusterHttpTest, DrainingNodeKeepsItsStreamsAndLosesWhatItHasNotBegun) {
  Start();
  FakeNode& d0 = AddNode(proto::NODE_ROLE_DECODE, "d0", /*free_blocks=*/1000);
  FakeNode& d1 = AddNode(proto::NODE_ROLE_DECODE, "d1", /*free_blocks=*/10);
  d1.SetLoad(0, 0, 10, 0);
  // The stream: 8 tokens, 60 ms apart, on d0.
  d0.SetScript({{kHello, kWorld, kWorld, kWorld, kWorld, kWorld, kWorld, kEos},
                proto::FINISH_REASON_STOP,
                0,
                -1,
                /*step_ms=*/60});
  HttpResult streamed, queued;
  std::thread a([&] { streamed = router::testing::Post(port_, "/v1/completions", {{"prompt", "a"}}); });
  ASSERT_TRUE(d0.WaitFor([&] { return d0.prefills().size() == 1; }));
  // The next request waits at d0 without a token.
  d0.SetScript({{kHello, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/0});
  d1.SetScript({{kWorld, kEos}, proto::FINISH_REASON_STOP});
  std::thread b([&] { queued = router::testing::Post(port_, "/v1/completions", {{"prompt", "b"}}); });
  ASSERT_TRUE(d0.WaitFor([&] { return d0.prefills().size() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // the stream is 2 tokens in
  d0.SetDraining(true);
  a.join();
  b.join();
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.Json()["choices"][0]["text"], "Hello world world world world world world");
  ASSERT_EQ(queued.status, 200) << queued.body;
  EXPECT_EQ(queued.Json()["choices"][0]["text"], " world");
  const uint64_t moved_id = d0.prefills()[1].request_id();
  ASSERT_EQ(d1.prefills().size(), 1u) << "only the request without a token moved";
  EXPECT_EQ(d1.prefills()[0].request_id(), moved_id);
  EXPECT_EQ(d1.prefills()[0].epoch(), 2u);
  ASSERT_TRUE(d0.WaitFor([&] { return !d0.cancels().empty(); }));
  EXPECT_EQ(d0.cancels()[0].request_id(), moved_id);
  EXPECT_EQ(d0.cancels()[0].epoch(), 1u);
}

// A silent decode node with a local PrefillRequest still unanswered: the silence makes it
// dead, its requests move, and only then does the close fail the pending call, which
// ends nothing (the 17 "heartbeats stopped" failures of issue 27).
TEST_F(ClusterHttpTest, SilentDecodeWithItsAckPendingMovesTheRequest) {
  ClusterConfig config;
  config.node_dead_after_ms = 300;
  Start(config);
  FakeNode& quiet = AddNode(proto::NODE_ROLE_DECODE, "d-quiet", /*free_blocks=*/1000);
  FakeNode& other = AddNode(proto::NODE_ROLE_DECODE, "d-other", /*free_blocks=*/10);
  quiet.SetScript({{kHello, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/0});
  quiet.SetLocalAckDelayMs(3000);
  other.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP});
  HttpResult r;
  std::thread client([&] { r = router::testing::Post(port_, "/v1/completions", {{"prompt", "x"}}); });
  ASSERT_TRUE(quiet.WaitFor([&] { return !quiet.prefills().empty(); }));
  quiet.StopHeartbeats();
  client.join();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["text"], "Hello world");
  ASSERT_EQ(other.prefills().size(), 1u);
  EXPECT_EQ(other.prefills()[0].epoch(), 2u);
}

TEST_F(ClusterHttpTest, ClientDisconnectCancelReachesTheNodes) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddPrefill(d);
  d.SetScript({{kHello, kWorld, kEos}, proto::FINISH_REASON_STOP, 0, /*hold_after=*/1});
  StartStreamAndHangUp();
  ASSERT_TRUE(d.WaitFor([&] { return !d.cancels().empty(); }, 3000));
  EXPECT_EQ(d.cancels()[0].request_id(), d.reserves()[0].request_id());
  EXPECT_EQ(d.cancels()[0].epoch(), 1u);
  ASSERT_TRUE(d.WaitFor([&] { return engine_->num_inflight() == 0; }, 3000));
}

// The decode node answers the Cancel of a remote handoff with an error entry (its
// receiver session failed). That must end nothing more: the router ended the request
// before cancelling, so no "prefill failed, go local" starts a newer epoch on decode
// (which nobody would cancel: the client is gone).
TEST_F(ClusterHttpTest, CancelDuringHandoffStartsNoLocalPath) {
  Start();
  FakeNode& d = AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddNode(proto::NODE_ROLE_PREFILL, "p0");  // acks and holds: the request stays in handoff
  d.SetCancelFailsHandoff(true);
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    boost::asio::io_context ioc;
    auto socket = SendStreamRequest(ioc);
    ASSERT_TRUE(d.WaitFor([&] { return d.reserves().size() == static_cast<size_t>(i + 1); }, 3000));
    socket.close();
    ASSERT_TRUE(d.WaitFor([&] { return d.cancels().size() == static_cast<size_t>(i + 1); }, 3000));
  }
  ASSERT_TRUE(d.WaitFor([&] { return engine_->num_inflight() == 0; }, 3000));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time for a wrong PrefillRequest
  EXPECT_EQ(d.prefills().size(), 0u) << "a cancelled request went down the local path";
  for (const proto::Cancel& c : d.cancels()) EXPECT_EQ(c.epoch(), 1u);
}

TEST_F(ClusterHttpTest, MetricsShowNodeCounts) {
  Start();
  AddNode(proto::NODE_ROLE_DECODE, "d0");
  AddNode(proto::NODE_ROLE_DECODE, "d1");
  AddNode(proto::NODE_ROLE_PREFILL, "p0");
  ASSERT_TRUE(nodes_[0]->WaitFor(
      [&] { return registry_.RenderText().find("tandem_router_nodes{role=\"decode\"} 2") != std::string::npos; }));
  HttpResult r = router::testing::Send(port_, "GET", "/metrics", "");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("tandem_router_nodes{role=\"prefill\"} 1"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("tandem_time_to_first_token_seconds"), std::string::npos);
}

// What an autoscaler acts on, per pool, from the nodes' heartbeats (heartbeat GPU tier: 1000 blocks).
TEST_F(ClusterHttpTest, MetricsShowPoolLoads) {
  Start();
  FakeNode& d0 = AddNode(proto::NODE_ROLE_DECODE, "d0");
  FakeNode& d1 = AddNode(proto::NODE_ROLE_DECODE, "d1");
  FakeNode& p0 = AddNode(proto::NODE_ROLE_PREFILL, "p0");
  d0.SetLoad(/*running=*/16, /*waiting=*/3, /*free_blocks=*/250, /*queued_prefill_tokens=*/0);
  d1.SetLoad(32, 5, 750, 0);
  p0.SetLoad(0, 2, 900, 4096);
  const std::vector<std::string> want = {
      "tandem_router_pool_queued_requests{pool=\"decode\"} 8",
      "tandem_router_pool_queued_requests{pool=\"prefill\"} 2",
      "tandem_router_pool_batch_occupancy{pool=\"decode\"} 0.375",  // 48 / (2 x 64)
      "tandem_router_pool_kv_headroom{pool=\"decode\"} 0.5",        // 1000 / 2000
      "tandem_router_pool_kv_headroom{pool=\"prefill\"} 0.9",
      "tandem_router_pool_inflight_prefill_tokens{pool=\"prefill\"} 0"};
  auto all_there = [&] {
    const std::string text = registry_.RenderText();
    for (const std::string& line : want) {
      if (text.find(line) == std::string::npos) return false;
    }
    return true;
  };
  ASSERT_TRUE(d0.WaitFor(all_there, 3000)) << registry_.RenderText();
  static_assert(testing::kFakeMaxRunning == 64, "the occupancy above assumes it");
}

}  // namespace
}  // namespace tandem::router::cluster
