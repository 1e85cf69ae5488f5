// Refused Hellos are logged by the server with the reason, once per peer and
// reason within the limiter's interval; the client gets the reason in its status
// (issue 27 item 6: every refusal logged on both sides).
#include <gtest/gtest.h>

#include <string>

#include "common/net/frame.h"
#include "rpc_test_util.h"
#include "tests/testing/log_capture.h"

namespace tandem::net {
namespace {

using testing::ClientConfig;
using testing::ErrorIn;
using testing::RawExchange;
using testing::ServerConfig;

class RpcRefusalLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RpcServer::Start(loop_, ServerConfig(), RpcHandlers{});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  void TearDown() override {
    server_->Stop();
    loop_.Stop();
  }

  tandem::testing::LogCapture logs_;  // before the loop: outlives its threads
  EventLoop loop_{2};
  std::unique_ptr<RpcServer> server_;
};

TEST_F(RpcRefusalLogTest, WrongTokenIsLoggedByTheServerOncePerInterval) {
  auto client = RpcClient::Create(loop_, ClientConfig("a-wrong-token-but-long-enough"), RpcHandlers{});
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 5; ++i) {
    auto conn = (*client)->Connect(server_->address());
    ASSERT_FALSE(conn.ok());
    EXPECT_EQ(conn.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(conn.status().message().find("wrong cluster token"), std::string::npos) << conn.status().ToString();
  }
  // The server logs before it replies, so the line is in by now; the dialing side gets
  // the reason as the status of Connect (its caller logs it: RouterLink).
  EXPECT_EQ(logs_.Count({"refused control connection from 127.0.0.1", "wrong cluster token"}), 1)
      << ::testing::PrintToString(logs_.Lines());
  EXPECT_EQ(logs_.Count({"cluster-token"}), 0) << "a token value reached the log";
  EXPECT_EQ(logs_.Count({"a-wrong-token"}), 0) << "a token value reached the log";
}

TEST_F(RpcRefusalLogTest, ProtocolVersionSkewIsLoggedWithBothVersions) {
  proto::Hello hello;
  hello.set_protocol_version(proto::kProtocolVersion + 1);
  hello.set_cluster_token(testing::kToken);
  hello.set_peer_name("newer-node");
  const std::string frame = *EncodeFrame(FrameKind::kRequest, 1, hello, 1 << 20);
  for (int i = 0; i < 3; ++i) {
    Status refused = ErrorIn(RawExchange(server_->port(), frame));
    EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  }
  const std::string theirs = "protocol version " + std::to_string(proto::kProtocolVersion + 1);
  const std::string ours = "speaks " + std::to_string(proto::kProtocolVersion);
  EXPECT_EQ(logs_.Count({"refused control connection from 127.0.0.1", theirs, ours}), 1)
      << ::testing::PrintToString(logs_.Lines());
}

}  // namespace
}  // namespace tandem::net
