#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <thread>
#include <vector>

#include "common/net/frame.h"
#include "rpc_test_util.h"

namespace tandem::net {
namespace {

using testing::ClientConfig;
using testing::EchoReserve;
using testing::ErrorIn;
using testing::MakeReserve;
using testing::RawExchange;
using testing::ServerConfig;
using testing::Waiter;

class RpcTest : public ::testing::Test {
 protected:
  void StartServer(RpcHandlers handlers, RpcServerConfig config = ServerConfig()) {
    auto server = RpcServer::Start(loop_, std::move(config), std::move(handlers));
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  std::unique_ptr<RpcClient> MakeClient(RpcClientConfig config = ClientConfig(), RpcHandlers handlers = {}) {
    auto client = RpcClient::Create(loop_, std::move(config), std::move(handlers));
    TANDEM_CHECK(client.ok()) << client.status().ToString();
    return std::move(*client);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  // Handlers capture test locals by reference: stop the I/O threads before
  // those locals go out of scope, so no late callback (a close at teardown)
  // touches them. Call as the last statement of such a test.
  void StopLoopBeforeLocalsDie() { loop_.Stop(); }

  EventLoop loop_{2};
  std::unique_ptr<RpcServer> server_;
};

TEST_F(RpcTest, RequestReply) {
  RpcHandlers handlers;
  handlers.on_request = EchoReserve;
  StartServer(handlers);
  auto client = MakeClient();
  auto conn = client->Connect(server_->address());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  EXPECT_EQ((*conn)->peer_name(), "server");
  auto reply = (*conn)->CallAndWaitFor<proto::ReserveReply>(MakeReserve(42, 17), 2000);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id(), 42u);
  EXPECT_EQ(reply->prefix_hit_tokens(), 34);
  // One connection per peer: a second Connect returns the same one.
  auto again = client->Connect(server_->address());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), conn->get());
  EXPECT_EQ(server_->num_connections(), 1u);
}

TEST_F(RpcTest, ServerCallsTheClientOnTheSameConnectionAndRepliesFromAnotherThread) {
  Waiter waiter;
  std::shared_ptr<RpcConnection> server_side;
  RpcHandlers server_handlers;
  server_handlers.on_open = [&](const std::shared_ptr<RpcConnection>& conn) {
    waiter.Notify([&] { server_side = conn; });
  };
  StartServer(server_handlers);
  std::vector<std::thread> workers;  // the "engine" answers off the I/O thread
  std::mutex workers_mu;
  RpcHandlers client_handlers;
  client_handlers.on_request = [&](const std::shared_ptr<RpcConnection>& conn, MessagePtr message,
                                   Responder responder) {
    EXPECT_TRUE(conn->OnIoThread());
    std::lock_guard<std::mutex> lock(workers_mu);
    proto::ReserveRequest request = static_cast<const proto::ReserveRequest&>(*message);
    workers.emplace_back([request, responder] {
      proto::ReserveReply reply;
      reply.set_request_id(request.request_id());
      reply.set_prefix_hit_tokens(request.prompt_len() * 2);
      responder.Reply(reply);
    });
  };
  auto client = MakeClient(ClientConfig(), client_handlers);
  auto conn = *client->Connect(server_->address());
  ASSERT_TRUE(waiter.WaitFor([&] { return server_side != nullptr; }));
  EXPECT_EQ(server_side->peer_name(), "client");
  auto reply = server_side->CallAndWaitFor<proto::ReserveReply>(MakeReserve(8, 21), 2000);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id(), 8u);
  EXPECT_EQ(reply->prefix_hit_tokens(), 42);
  std::lock_guard<std::mutex> lock(workers_mu);
  for (auto& worker : workers) worker.join();
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, ErrorReplyCarriesTheHandlersStatus) {
  RpcHandlers handlers;
  handlers.on_request = [](const std::shared_ptr<RpcConnection>&, MessagePtr, Responder responder) {
    responder.Fail(ResourceExhaustedError("no free blocks"));
    responder.Reply(proto::Ack());  // ignored: the first answer wins
  };
  StartServer(handlers);
  auto client = MakeClient();
  auto conn = *client->Connect(server_->address());
  auto reply = conn->CallAndWait(MakeReserve(1, 1), 2000);
  EXPECT_EQ(reply.status(), ResourceExhaustedError("no free blocks"));
  // The connection stays usable after an error reply.
  EXPECT_EQ(conn->CallAndWait(MakeReserve(1, 1), 2000).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(RpcTest, ManyConcurrentRequestsEachGetTheirOwnReply) {
  RpcHandlers handlers;
  handlers.on_request = EchoReserve;
  StartServer(handlers);
  auto client = MakeClient();
  auto conn = *client->Connect(server_->address());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  Waiter waiter;
  int done = 0;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        uint64_t id = t * kPerThread + i;
        conn->Call(MakeReserve(id, static_cast<int>(id)), 5000, [&, id](StatusOr<MessagePtr> reply) {
          if (!reply.ok()) {
            ++wrong;
          } else {
            const auto& r = static_cast<const proto::ReserveReply&>(**reply);
            if (r.request_id() != id || r.prefix_hit_tokens() != static_cast<int>(id * 2)) ++wrong;
          }
          waiter.Notify([&] { ++done; });
        });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(waiter.WaitFor([&] { return done == kThreads * kPerThread; }, 20000));
  EXPECT_EQ(wrong.load(), 0);
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, OneWayStreamsArriveInOrderBothWays) {
  Waiter waiter;
  std::vector<uint64_t> server_steps;
  std::vector<uint64_t> client_steps;
  RpcHandlers server_handlers;
  server_handlers.on_message = [&](const std::shared_ptr<RpcConnection>& conn, MessagePtr message) {
    uint64_t step = static_cast<const proto::Tokens&>(*message).step();
    waiter.Notify([&] { server_steps.push_back(step); });
    proto::Tokens echo;  // the server streams back on the same connection
    echo.set_step(step + 1000000);
    EXPECT_TRUE(conn->Send(echo).ok());
  };
  StartServer(server_handlers);
  RpcHandlers client_handlers;
  client_handlers.on_message = [&](const std::shared_ptr<RpcConnection>&, MessagePtr message) {
    uint64_t step = static_cast<const proto::Tokens&>(*message).step();
    waiter.Notify([&] { client_steps.push_back(step); });
  };
  auto client = MakeClient(ClientConfig(), client_handlers);
  auto conn = *client->Connect(server_->address());
  constexpr int kMessages = 2000;
  for (int i = 0; i < kMessages; ++i) {
    proto::Tokens tokens;
    tokens.set_step(i);
    auto* entry = tokens.add_entries();
    entry->set_request_id(i);
    entry->add_token_ids(i);
    ASSERT_TRUE(conn->Send(tokens).ok());
  }
  ASSERT_TRUE(
      waiter.WaitFor([&] { return server_steps.size() == kMessages && client_steps.size() == kMessages; }, 20000));
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_EQ(server_steps[i], static_cast<uint64_t>(i));
    ASSERT_EQ(client_steps[i], static_cast<uint64_t>(i) + 1000000);
  }
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, DeadlineExceededWhenNoReplyAndLateReplyIsDropped) {
  std::mutex mu;
  std::vector<Responder> held;
  RpcHandlers handlers;
  handlers.on_request = [&](const std::shared_ptr<RpcConnection>&, MessagePtr, Responder responder) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(responder);  // never answered until the test says so
  };
  StartServer(handlers);
  auto client = MakeClient();
  auto conn = *client->Connect(server_->address());
  auto start = std::chrono::steady_clock::now();
  auto reply = conn->CallAndWait(MakeReserve(5, 1), 200);
  auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(elapsed_ms, 190);
  EXPECT_LT(elapsed_ms, 2000);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(held.size(), 1u);
    held[0].Reply(proto::Ack());  // late: the client drops it
  }
  EXPECT_TRUE(conn->is_open());
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, DroppedResponderAnswersInternal) {
  RpcHandlers handlers;
  handlers.on_request = [](const std::shared_ptr<RpcConnection>&, MessagePtr, Responder) {};
  StartServer(handlers);
  auto client = MakeClient();
  auto conn = *client->Connect(server_->address());
  EXPECT_EQ(conn->CallAndWait(MakeReserve(1, 1), 2000).status().code(), StatusCode::kInternal);
}

TEST_F(RpcTest, PeerCloseIsNoticedAndPendingCallsFail) {
  Waiter waiter;
  bool server_saw_close = false;
  std::shared_ptr<RpcConnection> server_side;
  RpcHandlers handlers;
  handlers.on_open = [&](const std::shared_ptr<RpcConnection>& conn) { waiter.Notify([&] { server_side = conn; }); };
  std::mutex held_mu;
  std::vector<Responder> held;  // requests left unanswered on purpose
  handlers.on_request = [&](const std::shared_ptr<RpcConnection>&, MessagePtr, Responder responder) {
    std::lock_guard<std::mutex> lock(held_mu);
    held.push_back(responder);
  };
  handlers.on_close = [&](const std::shared_ptr<RpcConnection>&, const Status&) {
    waiter.Notify([&] { server_saw_close = true; });
  };
  StartServer(handlers);
  bool client_saw_close = false;
  Status client_close_status;
  RpcHandlers client_handlers;
  client_handlers.on_close = [&](const std::shared_ptr<RpcConnection>&, const Status& status) {
    waiter.Notify([&] {
      client_saw_close = true;
      client_close_status = status;
    });
  };
  auto client = MakeClient(ClientConfig(), client_handlers);
  auto conn = *client->Connect(server_->address());
  ASSERT_TRUE(waiter.WaitFor([&] { return server_side != nullptr; }));
  Waiter call_waiter;
  std::optional<Status> call_status;
  conn->Call(MakeReserve(1, 1), 10000,
             [&](StatusOr<MessagePtr> reply) { call_waiter.Notify([&] { call_status = reply.status(); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server_side->Close(CancelledError("test closes"));
  ASSERT_TRUE(waiter.WaitFor([&] { return client_saw_close && server_saw_close; }));
  EXPECT_EQ(client_close_status.code(), StatusCode::kUnavailable);
  ASSERT_TRUE(call_waiter.WaitFor([&] { return call_status.has_value(); }));
  EXPECT_EQ(call_status->code(), StatusCode::kUnavailable);
  EXPECT_FALSE(conn->is_open());
  EXPECT_EQ(conn->Send(proto::Ping()).code(), StatusCode::kUnavailable);
  // The client dials a fresh connection next time.
  auto again = client->Connect(server_->address());
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), conn.get());
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, SilentPeerIsCutByIdleTimeout) {
  Waiter waiter;
  std::optional<Status> server_close;
  RpcServerConfig config = ServerConfig();
  config.rpc.keepalive_interval_ms = 50;
  config.rpc.idle_timeout_ms = 300;
  RpcHandlers handlers;
  handlers.on_close = [&](const std::shared_ptr<RpcConnection>&, const Status& status) {
    waiter.Notify([&] { server_close = status; });
  };
  StartServer(handlers, config);
  RpcClientConfig client_config = ClientConfig();
  client_config.rpc.keepalive_interval_ms = 0;  // this client never pings: it looks dead
  client_config.rpc.idle_timeout_ms = 0;
  auto client = MakeClient(client_config);
  auto conn = *client->Connect(server_->address());
  ASSERT_TRUE(waiter.WaitFor([&] { return server_close.has_value(); }, 3000));
  EXPECT_NE(server_close->message().find("silent"), std::string::npos) << server_close->ToString();
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, KeepalivesHoldAnIdleConnectionOpen) {
  RpcServerConfig config = ServerConfig();
  config.rpc.keepalive_interval_ms = 50;
  config.rpc.idle_timeout_ms = 1000;
  StartServer({}, config);
  RpcClientConfig client_config = ClientConfig();
  client_config.rpc.keepalive_interval_ms = 50;
  client_config.rpc.idle_timeout_ms = 1000;
  auto client = MakeClient(client_config);
  auto conn = *client->Connect(server_->address());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(conn->is_open());
  EXPECT_EQ(server_->num_connections(), 1u);
}

TEST_F(RpcTest, WrongClusterTokenIsRefusedAndNoHandlerRuns) {
  std::atomic<int> handler_calls{0};
  RpcHandlers handlers;
  handlers.on_open = [&](const std::shared_ptr<RpcConnection>&) { ++handler_calls; };
  handlers.on_request = [&](const std::shared_ptr<RpcConnection>&, MessagePtr, Responder) { ++handler_calls; };
  handlers.on_message = [&](const std::shared_ptr<RpcConnection>&, MessagePtr) { ++handler_calls; };
  handlers.on_close = [&](const std::shared_ptr<RpcConnection>&, const Status&) { ++handler_calls; };
  StartServer(handlers);
  auto client = MakeClient(ClientConfig("a-wrong-token-but-long-enough"));
  auto conn = client->Connect(server_->address());
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), StatusCode::kPermissionDenied) << conn.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(handler_calls.load(), 0);
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, PeerSkippingHelloGetsOneErrorAndAClose) {
  std::atomic<int> handler_calls{0};
  RpcHandlers handlers;
  handlers.on_request = [&](const std::shared_ptr<RpcConnection>&, MessagePtr, Responder) { ++handler_calls; };
  StartServer(handlers);
  std::string reserve = *EncodeFrame(FrameKind::kRequest, 1, MakeReserve(1, 1), 1 << 20);
  std::string received = RawExchange(server_->port(), reserve);
  EXPECT_EQ(ErrorIn(received).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(handler_calls.load(), 0);
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, GarbageAndOversizedFramesCloseOnlyThatConnection) {
  RpcHandlers handlers;
  handlers.on_request = EchoReserve;
  StartServer(handlers);
  std::string http = RawExchange(server_->port(), "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(ErrorIn(http).code(), StatusCode::kInvalidArgument);
  // A header announcing a payload above the cap: refused from the header alone.
  proto::Hello hello;
  std::string huge = *EncodeFrame(FrameKind::kRequest, 1, hello, 1 << 20);
  huge[16] = 0x7f;  // payload length ~2 GiB
  EXPECT_EQ(ErrorIn(RawExchange(server_->port(), huge)).code(), StatusCode::kResourceExhausted);
  // The server still serves others.
  auto client = MakeClient();
  auto conn = client->Connect(server_->address());
  ASSERT_TRUE(conn.ok());
  EXPECT_TRUE((*conn)->CallAndWait(MakeReserve(3, 3), 2000).ok());
}

TEST_F(RpcTest, UnauthenticatedPeerCannotAnnounceABigFrame) {
  StartServer({});
  // 1 MiB is far below max_frame_bytes (64 MiB) but above the pre-Hello cap.
  std::string big = *EncodeFrame(FrameKind::kRequest, 1, proto::Hello(), 1 << 20);
  big[17] = 0x10;  // payload length 0x00100000
  EXPECT_EQ(ErrorIn(RawExchange(server_->port(), big)).code(), StatusCode::kResourceExhausted);
}

TEST_F(RpcTest, LargeMessagesFlowAfterHelloAndOversizedOnesCloseTheConnection) {
  Waiter waiter;
  size_t received_tokens = 0;
  std::optional<Status> server_close;
  RpcServerConfig config = ServerConfig();
  config.rpc.max_frame_bytes = 1 << 20;
  config.rpc.max_queued_write_bytes = 4 << 20;
  RpcHandlers handlers;
  handlers.on_message = [&](const std::shared_ptr<RpcConnection>&, MessagePtr message) {
    size_t n = static_cast<const proto::Tokens&>(*message).entries(0).token_ids_size();
    waiter.Notify([&] { received_tokens = n; });
  };
  handlers.on_close = [&](const std::shared_ptr<RpcConnection>&, const Status& status) {
    waiter.Notify([&] { server_close = status; });
  };
  StartServer(handlers, config);
  RpcClientConfig client_config = ClientConfig();
  client_config.rpc.max_frame_bytes = 4 << 20;  // this client would send more than the server takes
  auto client = MakeClient(client_config);
  auto conn = *client->Connect(server_->address());
  proto::Tokens tokens;
  auto* entry = tokens.add_entries();
  for (int i = 0; i < 200000; ++i) entry->add_token_ids(i);  // ~600 KB
  ASSERT_TRUE(conn->Send(tokens).ok());
  ASSERT_TRUE(waiter.WaitFor([&] { return received_tokens == 200000; }));
  for (int i = 0; i < 300000; ++i) entry->add_token_ids(100000 + i);  // ~1.5 MB > 1 MiB
  ASSERT_TRUE(conn->Send(tokens).ok());
  ASSERT_TRUE(waiter.WaitFor([&] { return server_close.has_value(); }));
  EXPECT_EQ(server_close->code(), StatusCode::kResourceExhausted) << server_close->ToString();
  EXPECT_EQ(received_tokens, 200000u);
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, SendFailsWithResourceExhaustedWhenThePeerStopsReading) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  RpcHandlers handlers;
  handlers.on_message = [released](const std::shared_ptr<RpcConnection>&, MessagePtr) {
    released.wait();  // a stuck peer: this connection reads nothing more
  };
  StartServer(handlers);
  RpcClientConfig config = ClientConfig();
  config.rpc.max_frame_bytes = 1 << 20;
  config.rpc.max_queued_write_bytes = 2 << 20;
  auto client = MakeClient(config);
  auto conn = *client->Connect(server_->address());
  Status status;
  int sent = 0;
  for (; sent < 5000 && status.ok(); ++sent) {
    proto::Tokens chunk;
    auto* entry = chunk.add_entries();
    for (int i = 0; i < 30000; ++i) entry->add_token_ids(i);  // ~90 KB
    status = conn->Send(chunk);
  }
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted) << "sent " << sent;
  release.set_value();
  StopLoopBeforeLocalsDie();
}

TEST_F(RpcTest, SilentUnauthenticatedPeerIsCutAtHelloTimeout) {
  RpcServerConfig config = ServerConfig();
  config.rpc.hello_timeout_ms = 200;
  StartServer({}, config);
  auto start = std::chrono::steady_clock::now();
  std::string received = RawExchange(server_->port(), "");  // connects and says nothing
  auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(received.empty());
  EXPECT_LT(elapsed_ms, 3000);
}

TEST_F(RpcTest, ConnectFailuresAreStatuses) {
  auto client = MakeClient();
  EXPECT_EQ(client->Connect("not an address").status().code(), StatusCode::kInvalidArgument);
  // Nothing listens on port 1 of loopback.
  EXPECT_EQ(client->Connect("127.0.0.1:1").status().code(), StatusCode::kUnavailable);
}

TEST_F(RpcTest, ServerRefusesToStartOnABadAddress) {
  RpcServerConfig config = ServerConfig();
  config.listen_address = "example.com:0";
  EXPECT_EQ(RpcServer::Start(loop_, config, {}).status().code(), StatusCode::kInvalidArgument);
  config.listen_address = "127.0.0.1:0";
  config.rpc.cluster_token = "";
  EXPECT_EQ(RpcServer::Start(loop_, config, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::net
