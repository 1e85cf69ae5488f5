// The control-plane TLS fields (one net::TlsConfig, YAML `control_tls:`, flags
// --control-tls-*) of the node config and of the router's cluster config:
// parsing, ValidateMutual() of half-configured TLS, and the net::TlsConfig
// handed to RpcServer / RpcClient.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/node/node_config.h"
#include "router/cluster/cluster_config.h"

namespace tandem {
namespace {

void ExpectInvalid(const Status& status, const std::string& mentions) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.ToString().find(mentions), std::string::npos) << status.ToString();
}

net::TlsConfig FullTls() {
  net::TlsConfig t;
  t.enabled = true;
  t.cert_file = "/certs/node.pem";
  t.key_file = "/certs/node.key";
  t.ca_file = "/certs/ca.pem";
  return t;
}

TEST(NodeControlTlsTest, OffByDefaultAndCompleteWhenOn) {
  EXPECT_TRUE(net::TlsConfig().ValidateMutual("control_tls").ok());
  EXPECT_TRUE(FullTls().ValidateMutual("control_tls").ok());
}

TEST(NodeControlTlsTest, HalfConfiguredIsInvalidArgument) {
  net::TlsConfig t = FullTls();
  t.key_file.clear();
  ExpectInvalid(t.ValidateMutual("control_tls"), "control_tls.key_file");
  t = FullTls();
  t.cert_file.clear();
  ExpectInvalid(t.ValidateMutual("control_tls"), "control_tls.cert_file");
  t = FullTls();
  t.ca_file.clear();
  ExpectInvalid(t.ValidateMutual("control_tls"), "control_tls.ca_file");
  t = FullTls();
  t.enabled = false;  // files without the switch: a forgotten half, not silently plaintext
  ExpectInvalid(t.ValidateMutual("control_tls"), "control_tls.enabled is false");
  t = net::TlsConfig();
  t.enabled = true;
  ExpectInvalid(t.ValidateMutual("control_tls"), "control_tls.cert_file");
}

TEST(NodeControlTlsTest, NodeConfigValidateRejectsHalfTls) {
  node::NodeConfig c;
  c.cluster_token = "0123456789abcdef0123";
  c.control_tls.enabled = true;
  c.control_tls.cert_file = "/certs/node.pem";
  ExpectInvalid(c.Validate(), "control_tls.key_file");
}

TEST(NodeControlTlsTest, YamlAndFlagsReachServerAndClientRpcConfigs) {
  node::NodeConfig c;
  c.cluster_token = "0123456789abcdef0123";
  config::ConfigBinder binder;
  c.Bind(binder);
  ASSERT_TRUE(binder
                  .ApplyYaml("control_tls:\n  enabled: true\n  cert_file: /y/node.pem\n  key_file: /y/node.key\n"
                             "  ca_file: /y/ca.pem\n",
                             "test.yaml")
                  .ok());
  CLI::App app;
  binder.AddFlags(app);
  std::vector<const char*> argv = {"node", "--control-tls-ca-file", "/f/ca.pem", "--control-tls-server-name",
                                   "router.internal"};
  ASSERT_NO_THROW(app.parse(static_cast<int>(argv.size()), argv.data()));
  ASSERT_TRUE(binder.Apply().ok());
  EXPECT_TRUE(c.control_tls.enabled);
  EXPECT_EQ(c.control_tls.cert_file, "/y/node.pem");
  EXPECT_EQ(c.control_tls.ca_file, "/f/ca.pem");  // the flag overrides the file

  net::TlsConfig server = c.ServerConfig().rpc.tls;
  EXPECT_TRUE(server.enabled);
  EXPECT_EQ(server.cert_file, "/y/node.pem");
  EXPECT_EQ(server.key_file, "/y/node.key");
  EXPECT_EQ(server.ca_file, "/f/ca.pem");  // peers dialing this node must present a certificate
  EXPECT_TRUE(c.ServerConfig().Validate().ok());

  net::TlsConfig client = c.ClientConfig().rpc.tls;
  EXPECT_TRUE(client.enabled);
  EXPECT_EQ(client.cert_file, "/y/node.pem");  // presented to the router and peers
  EXPECT_EQ(client.ca_file, "/f/ca.pem");
  EXPECT_EQ(client.server_name, "router.internal");
  EXPECT_TRUE(c.ClientConfig().Validate().ok());
}

TEST(NodeControlTlsTest, PlaintextByDefaultInRpcConfigs) {
  node::NodeConfig c;
  EXPECT_FALSE(c.ServerConfig().rpc.tls.enabled);
  EXPECT_FALSE(c.ClientConfig().rpc.tls.enabled);
}

router::cluster::ClusterConfig WithToken(router::cluster::ClusterConfig c) {
  c.cluster_token = "0123456789abcdef0123";
  return c;
}

StatusOr<router::cluster::ClusterConfig> ParseCluster(const std::string& yaml) {
  return config::FromYaml<router::cluster::ClusterConfig>(yaml);
}

TEST(ClusterTlsConfigTest, ParsesTheTlsMap) {
  auto c = ParseCluster(
      "control_tls:\n  enabled: true\n  cert_file: /c/router.pem\n  key_file: /c/router.key\n"
      "  ca_file: /c/ca.pem\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->control_tls.enabled);
  EXPECT_TRUE(WithToken(*c).Validate().ok());
  EXPECT_EQ(c->control_tls.cert_file, "/c/router.pem");
  EXPECT_EQ(c->control_tls.key_file, "/c/router.key");
  EXPECT_EQ(c->control_tls.ca_file, "/c/ca.pem");  // nodes must present a certificate signed by it
  EXPECT_TRUE(c->control_tls.Validate(/*is_server=*/true).ok());
  EXPECT_FALSE(router::cluster::ClusterConfig().control_tls.enabled);
}

TEST(ClusterTlsConfigTest, BadTlsYamlIsInvalidArgument) {
  ExpectInvalid(ParseCluster("control_tls:\n  cert: /x\n").status(), "unknown config key 'control_tls.cert'");
  // The router dials nobody: no server_name.
  ExpectInvalid(ParseCluster("control_tls:\n  server_name: r\n").status(),
                "unknown config key 'control_tls.server_name'");
  ExpectInvalid(ParseCluster("control_tls: [1, 2]\n").status(), "unknown config key 'control_tls'");
  ExpectInvalid(ParseCluster("control_tls:\n  enabled: maybe\n").status(), "'control_tls.enabled': not a boolean");
  ExpectInvalid(ParseCluster("control_tls:\n  ca_file: [a]\n").status(), "'control_tls.ca_file' is not a list");
}

TEST(ClusterTlsConfigTest, HalfConfiguredIsInvalidArgument) {
  auto parse = [](const std::string& yaml) {
    auto c = ParseCluster(yaml);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return WithToken(*c).Validate();
  };
  ExpectInvalid(parse("control_tls: {enabled: true, cert_file: /a.pem, ca_file: /ca.pem}"), "control_tls.key_file");
  ExpectInvalid(parse("control_tls: {enabled: true, key_file: /a.key, ca_file: /ca.pem}"), "control_tls.cert_file");
  ExpectInvalid(parse("control_tls: {enabled: true, cert_file: /a.pem, key_file: /a.key}"), "control_tls.ca_file");
  ExpectInvalid(parse("control_tls: {cert_file: /a.pem, key_file: /a.key, ca_file: /ca.pem}"),
                "control_tls.enabled is false");
  EXPECT_TRUE(parse("control_tls: {enabled: false}").ok());
}

}  // namespace
}  // namespace tandem
