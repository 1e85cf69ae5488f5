#include "common/net/address.h"

#include <gtest/gtest.h>

#include "common/net/cluster_token.h"
#include "common/net/rpc_config.h"

namespace tandem::net {
namespace {

TEST(AddressTest, ParsesHostPortForms) {
  auto v4 = ParseHostPort("127.0.0.1:7400");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 7400);
  auto v6 = ParseHostPort("[::1]:80");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(FormatHostPort(*v6), "[::1]:80");
  EXPECT_EQ(ParseHostPort("decode-0.svc:65535")->port, 65535);
  for (const char* bad :
       {"", "host", ":80", "host:", "host:65536", "host:8x", "::1:80", "[::1]80", "[::1", "host:-1"}) {
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParseHostPort(std::string(600, 'a') + ":1").ok());
}

TEST(ClusterTokenTest, MatchesOnlyTheExactToken) {
  ClusterToken token("0123456789abcdef");
  EXPECT_TRUE(token.Matches("0123456789abcdef"));
  EXPECT_FALSE(token.Matches("0123456789abcdeF"));
  EXPECT_FALSE(token.Matches("0123456789abcde"));
  EXPECT_FALSE(token.Matches("0123456789abcdef0"));
  EXPECT_FALSE(token.Matches(""));
}

TEST(RpcConfigTest, ValidateCatchesBadSettings) {
  RpcServerConfig server;
  EXPECT_FALSE(server.Validate().ok());  // no cluster token
  server.rpc.cluster_token = "0123456789abcdef";
  EXPECT_TRUE(server.Validate().ok()) << server.Validate().ToString();
  EXPECT_EQ(server.listen_address.rfind("127.0.0.1:", 0), 0u);  // loopback by default
  server.rpc.cluster_token = "short";
  EXPECT_FALSE(server.Validate().ok());
  server.rpc.cluster_token = "0123456789abcdef";
  server.rpc.idle_timeout_ms = server.rpc.keepalive_interval_ms;
  EXPECT_FALSE(server.Validate().ok());
  server.rpc.idle_timeout_ms = 5000;
  server.listen_address = "nope";
  EXPECT_FALSE(server.Validate().ok());
  server.listen_address = "127.0.0.1:0";
  server.rpc.tls.enabled = true;
  EXPECT_FALSE(server.Validate().ok());  // a TLS server needs a certificate
  server.rpc.tls.cert_file = "a.pem";
  server.rpc.tls.key_file = "a.key";
  EXPECT_TRUE(server.Validate().ok());

  RpcClientConfig client;
  client.rpc.cluster_token = "0123456789abcdef";
  EXPECT_TRUE(client.Validate().ok());
  client.rpc.tls.enabled = true;
  EXPECT_FALSE(client.Validate().ok());  // a TLS client needs a CA
  client.rpc.tls.ca_file = "ca.pem";
  EXPECT_TRUE(client.Validate().ok());
  client.connect_timeout_ms = 0;
  EXPECT_FALSE(client.Validate().ok());
}

}  // namespace
}  // namespace tandem::net
