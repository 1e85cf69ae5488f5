// The control-plane TLS fields of the node config (YAML `control_tls:`, flags
// --control-tls-*) and of the router's cluster config (YAML `cluster.tls:`):
// parsing, Validate() of half-configured TLS, and the net::TlsConfig handed to
// RpcServer / RpcClient.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

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

node::NodeTlsConfig FullNodeTls() {
  node::NodeTlsConfig t;
  t.enabled = true;
  t.cert_file = "/certs/node.pem";
  t.key_file = "/certs/node.key";
  t.ca_file = "/certs/ca.pem";
  return t;
}

TEST(NodeTlsConfigTest, OffByDefaultAndCompleteWhenOn) {
  EXPECT_TRUE(node::NodeTlsConfig().Validate().ok());
  EXPECT_TRUE(FullNodeTls().Validate().ok());
}

TEST(NodeTlsConfigTest, HalfConfiguredIsInvalidArgument) {
  node::NodeTlsConfig t = FullNodeTls();
  t.key_file.clear();
  ExpectInvalid(t.Validate(), "control_tls.key_file");
  t = FullNodeTls();
  t.cert_file.clear();
  ExpectInvalid(t.Validate(), "control_tls.cert_file");
  t = FullNodeTls();
  t.ca_file.clear();
  ExpectInvalid(t.Validate(), "control_tls.ca_file");
  t = FullNodeTls();
  t.enabled = false;  // files without the switch: a forgotten half, not silently plaintext
  ExpectInvalid(t.Validate(), "control_tls.enabled is false");
  t = node::NodeTlsConfig();
  t.enabled = true;
  ExpectInvalid(t.Validate(), "control_tls.cert_file");
}

TEST(NodeTlsConfigTest, NodeConfigValidateRejectsHalfTls) {
  node::NodeConfig c;
  c.cluster_token = "0123456789abcdef0123";
  c.control_tls.enabled = true;
  c.control_tls.cert_file = "/certs/node.pem";
  ExpectInvalid(c.Validate(), "control_tls.key_file");
}

TEST(NodeTlsConfigTest, YamlAndFlagsReachServerAndClientRpcConfigs) {
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

TEST(NodeTlsConfigTest, PlaintextByDefaultInRpcConfigs) {
  node::NodeConfig c;
  EXPECT_FALSE(c.ServerConfig().rpc.tls.enabled);
  EXPECT_FALSE(c.ClientConfig().rpc.tls.enabled);
}

router::cluster::ClusterConfig WithToken(router::cluster::ClusterConfig c) {
  c.cluster_token = "0123456789abcdef0123";
  return c;
}

TEST(ClusterTlsConfigTest, ParsesTheTlsMap) {
  auto c = router::cluster::ParseClusterConfig(YAML::Load(
      "tls:\n  enabled: true\n  cert_file: /c/router.pem\n  key_file: /c/router.key\n  ca_file: /c/ca.pem\n"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->tls.enabled);
  EXPECT_TRUE(WithToken(*c).Validate().ok());
  net::TlsConfig server = c->tls.ForServer();
  EXPECT_TRUE(server.enabled);
  EXPECT_EQ(server.cert_file, "/c/router.pem");
  EXPECT_EQ(server.key_file, "/c/router.key");
  EXPECT_EQ(server.ca_file, "/c/ca.pem");  // nodes must present a certificate signed by it
  net::TlsConfig plain = router::cluster::ClusterConfig().tls.ForServer();
  EXPECT_FALSE(plain.enabled);
}

TEST(ClusterTlsConfigTest, BadTlsYamlIsInvalidArgument) {
  ExpectInvalid(router::cluster::ParseClusterConfig(YAML::Load("tls:\n  cert: /x\n")).status(),
                "unknown key cluster.tls.cert");
  ExpectInvalid(router::cluster::ParseClusterConfig(YAML::Load("tls: [1, 2]\n")).status(), "cluster.tls must be a map");
  ExpectInvalid(router::cluster::ParseClusterConfig(YAML::Load("tls:\n  enabled: maybe\n")).status(),
                "cluster.tls.enabled has the wrong type");
  ExpectInvalid(router::cluster::ParseClusterConfig(YAML::Load("tls:\n  ca_file: [a]\n")).status(),
                "cluster.tls.ca_file has the wrong type");
}

TEST(ClusterTlsConfigTest, HalfConfiguredIsInvalidArgument) {
  auto parse = [](const std::string& yaml) {
    auto c = router::cluster::ParseClusterConfig(YAML::Load(yaml));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return WithToken(*c).Validate();
  };
  ExpectInvalid(parse("tls: {enabled: true, cert_file: /a.pem, ca_file: /ca.pem}"), "cluster.tls.key_file");
  ExpectInvalid(parse("tls: {enabled: true, key_file: /a.key, ca_file: /ca.pem}"), "cluster.tls.cert_file");
  ExpectInvalid(parse("tls: {enabled: true, cert_file: /a.pem, key_file: /a.key}"), "cluster.tls.ca_file");
  ExpectInvalid(parse("tls: {cert_file: /a.pem, key_file: /a.key, ca_file: /ca.pem}"),
                "cluster.tls.enabled is false");
  EXPECT_TRUE(parse("tls: {enabled: false}").ok());
}

}  // namespace
}  // namespace tandem
