// RouterOptions, tandem-router's one configuration path: every key of
// deploy/router.yaml is a bound field and the reverse, --help lists each flag
// with its default, flags override the file, and unknown keys and bad values
// are errors naming the key.
#include "router/router_options.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tandem::router {
namespace {

using config::ConfigBinder;

std::string SourceDir() {
  const char* dir = std::getenv("TANDEM_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// The leaf keys of a YAML map, nested maps joined with '.'.
void LeafKeys(const YAML::Node& node, const std::string& prefix, std::set<std::string>* keys) {
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.as<std::string>();
    if (kv.second.IsMap()) {
      LeafKeys(kv.second, key + ".", keys);
    } else {
      keys->insert(key);
    }
  }
}

// Parses `args` (after the program name) into `options` through a fresh binder.
Status Parse(RouterOptions& options, const std::vector<std::string>& args) {
  ConfigBinder binder;
  options.Bind(binder);
  CLI::App app("test");
  binder.AddFlags(app);
  std::vector<const char*> argv = {"tandem-router"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(std::string("command line: ") + e.what());
  }
  return binder.Apply();
}

void ExpectInvalid(const Status& status, const std::string& mentions) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.ToString().find(mentions), std::string::npos) << status.ToString();
}

TEST(RouterOptionsTest, DeployYamlHoldsEveryKeyAndEveryKeyIsAFlag) {
  const std::string path = SourceDir() + "/deploy/router.yaml";
  std::set<std::string> file_keys;
  LeafKeys(YAML::LoadFile(path), "", &file_keys);

  RouterOptions options;
  ConfigBinder binder;
  options.Bind(binder);
  const std::vector<std::string> names = binder.Names();
  const std::set<std::string> name_set(names.begin(), names.end());
  EXPECT_EQ(name_set, file_keys) << "deploy/router.yaml and RouterOptions::Bind disagree";
  EXPECT_EQ(name_set.size(), names.size());
  for (const char* key : {"listen_port", "api_keys", "control_address", "cluster_token", "node_dead_after_ms", "mode",
                          "control_tls.enabled", "control_tls.ca_file", "model_dir", "log_level"}) {
    EXPECT_TRUE(name_set.count(key)) << key;
  }

  CLI::App app("test");
  binder.AddFlags(app);
  for (const std::string& name : names) {
    EXPECT_NE(app.get_option_no_throw(ConfigBinder::FlagName(name)), nullptr) << name;
  }
  // The shipped file parses and, with a model directory, validates.
  ASSERT_TRUE(Parse(options, {"--config", path, "--model-dir", "/m"}).ok());
  EXPECT_TRUE(options.Validate().ok()) << options.Validate().ToString();
  EXPECT_EQ(options.cluster.node_dead_after_ms, 10000);
  EXPECT_EQ(options.cluster.control_address, "127.0.0.1:7000");
  // No token in the shipped file: it names the installed token file.
  EXPECT_EQ(options.cluster.cluster_token, "");
  EXPECT_EQ(options.cluster.cluster_token_file, "/etc/tandem/cluster-token");
}

TEST(RouterOptionsTest, KubernetesConfigParsesAndValidates) {
  // The router's ConfigMap file of deploy/k8s: known keys, listening on every interface.
  RouterOptions options;
  ASSERT_TRUE(Parse(options, {"--config", SourceDir() + "/deploy/k8s/base/config/router.yaml", "--cluster-token-file",
                              "/etc/tandem/secret/cluster-token"})
                  .ok());
  EXPECT_TRUE(options.Validate().ok()) << options.Validate().ToString();
  EXPECT_EQ(options.http.listen_host, "0.0.0.0");
  EXPECT_EQ(options.http.listen_port, 8000);
  EXPECT_EQ(options.cluster.control_address, "0.0.0.0:7000");
}

TEST(RouterOptionsTest, ClusterTokenFileIsReadWhenTheTokenIsEmpty) {
  const std::string path = ::testing::TempDir() + "/router_options_token";
  std::ofstream(path, std::ios::binary) << "file-token-0123456789\n";
  cluster::ClusterConfig c;
  c.cluster_token_file = path;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  StatusOr<std::string> token = c.ResolveToken();
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(*token, "file-token-0123456789");
  c.cluster_token = "flag-token-0123456789";  // the token wins over the file
  EXPECT_EQ(*c.ResolveToken(), "flag-token-0123456789");
  c.cluster_token = "";
  c.cluster_token_file = path + ".missing";
  ExpectInvalid(c.ResolveToken().status(), "cannot read cluster_token_file");
  std::ofstream(path, std::ios::binary) << "short\n";
  c.cluster_token_file = path;
  ExpectInvalid(c.ResolveToken().status(), "fewer than 16 bytes");
  std::remove(path.c_str());
}

// The admin key comes from admin_key, else from admin_key_file; neither = the admin API is off.
TEST(RouterOptionsTest, AdminKeyFileIsReadWhenTheKeyIsEmpty) {
  const std::string path = ::testing::TempDir() + "/router_options_admin_key";
  std::ofstream(path, std::ios::binary) << "file-admin-key-0123456789\n";
  RouterOptions o;
  ASSERT_TRUE(Parse(o, {"--admin-key-file", path}).ok());
  EXPECT_EQ(o.http.admin_key, "") << "read at ResolveAdminKey, not at parse";
  ASSERT_TRUE(o.ResolveAdminKey().ok());
  EXPECT_EQ(o.http.admin_key, "file-admin-key-0123456789");
  RouterOptions flag;
  ASSERT_TRUE(Parse(flag, {"--admin-key", "flag-admin-key-0123456789", "--admin-key-file", path}).ok());
  ASSERT_TRUE(flag.ResolveAdminKey().ok());
  EXPECT_EQ(flag.http.admin_key, "flag-admin-key-0123456789");  // the key wins over the file
  RouterOptions none;
  EXPECT_TRUE(none.ResolveAdminKey().ok());
  EXPECT_EQ(none.http.admin_key, "");

  RouterOptions missing;
  missing.http.admin_key_file = path + ".missing";
  ExpectInvalid(missing.ResolveAdminKey(), "cannot read admin_key_file");
  std::ofstream(path, std::ios::binary) << "short\n";
  RouterOptions short_key;
  short_key.http.admin_key_file = path;
  ExpectInvalid(short_key.ResolveAdminKey(), "admin_key_file " + path + " holds fewer than 16 bytes");
  std::ofstream(path, std::ios::binary) << "shared-key-0123456789\n";
  RouterOptions shared;
  shared.http.admin_key_file = path;
  shared.http.api_keys = {{"shared-key-0123456789", "team"}};
  const Status same = shared.ResolveAdminKey();
  ExpectInvalid(same, "admin_key equals an API key");
  EXPECT_EQ(same.ToString().find("shared-key-0123456789"), std::string::npos) << "the key leaked";
  std::remove(path.c_str());
}

TEST(RouterOptionsTest, HelpListsEveryFlagWithItsDefault) {
  RouterOptions options;
  ConfigBinder binder;
  options.Bind(binder);
  std::map<std::string, std::string> defaults;  // from Dump(): "name: value" lines
  const std::string dump = binder.Dump();
  for (size_t start = 0; start < dump.size();) {
    const size_t end = dump.find('\n', start);
    const std::string line = dump.substr(start, end - start);
    const size_t colon = line.find(": ");
    defaults[line.substr(0, colon)] = line.substr(colon + 2);
    start = end + 1;
  }
  ASSERT_EQ(defaults.size(), binder.Names().size());
  EXPECT_EQ(defaults["node_dead_after_ms"], "10000");
  EXPECT_EQ(defaults["mode"], "disaggregated");
  EXPECT_EQ(defaults["control_tls.enabled"], "false");
  EXPECT_EQ(defaults["listen_port"], "8000");
  EXPECT_EQ(defaults["log_level"], "info");

  CLI::App app("tandem-router");
  binder.AddFlags(app);
  const std::string help = app.help();
  for (const auto& [name, value] : defaults) {
    const std::string flag = ConfigBinder::FlagName(name);
    const size_t at = help.find("  " + flag + " ");
    ASSERT_NE(at, std::string::npos) << flag << " missing from --help:\n" << help;
    const std::string entry = help.substr(at, help.find("\n  -", at + 1) - at);  // to the next option
    EXPECT_NE(entry.find("[" + value + "]"), std::string::npos) << entry;
  }
  EXPECT_NE(help.find("--config"), std::string::npos);
}

TEST(RouterOptionsTest, FlagsOverrideTheFile) {
  const std::string path = ::testing::TempDir() + "/router_options_test.yaml";
  std::ofstream(path) << "model_dir: /file/model\nlisten_port: 9100\nmax_queued_requests: 7\n"
                         "node_dead_after_ms: 4000\nmode: colocated\ncluster_token: file-token-0123456789\n"
                         "control_tls:\n  ca_file: /file/ca.pem\n  cert_file: /file/r.pem\n"
                         "api_keys:\n  - {key: sk-file-000001, tenant: file}\n";
  RouterOptions o;
  ASSERT_TRUE(Parse(o, {"--config", path, "--listen-port", "9200", "--node-dead-after-ms", "3000",
                        "--control-tls-ca-file", "/flag/ca.pem", "--api-keys", "key=sk-flag-000001,tenant=t1",
                        "--api-keys", "tenant=t2,key=sk-flag-000002", "--log-level", "warn"})
                  .ok());
  EXPECT_EQ(o.http.listen_port, 9200);                          // flag beats file
  EXPECT_EQ(o.http.max_queued_requests, 7);                     // file
  EXPECT_EQ(o.http.listen_host, "127.0.0.1");                   // default
  EXPECT_EQ(o.cluster.node_dead_after_ms, 3000);                // flag
  EXPECT_EQ(o.cluster.mode, cluster::ServingMode::kColocated);  // file
  EXPECT_EQ(o.cluster.control_tls.ca_file, "/flag/ca.pem");
  EXPECT_EQ(o.cluster.control_tls.cert_file, "/file/r.pem");
  EXPECT_EQ(o.model_dir, "/file/model");
  EXPECT_EQ(o.log_level, "warn");
  ASSERT_EQ(o.http.api_keys.size(), 2u);  // a list flag replaces the file's list
  EXPECT_EQ(o.http.api_keys[0].key, "sk-flag-000001");
  EXPECT_EQ(o.http.api_keys[0].tenant, "t1");
  EXPECT_EQ(o.http.api_keys[1].key, "sk-flag-000002");
  EXPECT_EQ(o.http.api_keys[1].tenant, "t2");
  std::remove(path.c_str());
}

TEST(RouterOptionsTest, UnknownKeysAndBadValuesAreClearErrors) {
  // The cluster keys are top-level, as on the nodes: a `cluster:` map is refused by name.
  ExpectInvalid(config::FromYaml<RouterOptions>("cluster:\n  control_address: x:1\n").status(),
                "unknown config key 'cluster.control_address'");
  ExpectInvalid(config::FromYaml<RouterOptions>("listen_prot: 1\n").status(), "unknown config key 'listen_prot'");
  ExpectInvalid(config::FromYaml<RouterOptions>("node_dead_after_ms: soon\n").status(),
                "'node_dead_after_ms': not a valid number");
  RouterOptions o;
  ExpectInvalid(Parse(o, {"--mode", "sideways"}), "'mode': 'sideways' is not one of disaggregated, colocated");
  ExpectInvalid(Parse(o, {"--log-level", "loud"}), "'log_level'");
  ExpectInvalid(Parse(o, {"--no-such-flag", "1"}), "command line");
  ExpectInvalid(Parse(o, {"--control-tls-enabled", "maybe"}), "not a boolean");
  const Status no_tenant = Parse(o, {"--api-keys", "key=sk-secret-0001"});
  ExpectInvalid(no_tenant, "lacks 'tenant'");
  EXPECT_EQ(no_tenant.ToString().find("sk-secret-0001"), std::string::npos) << "a key leaked";
  ExpectInvalid(Parse(o, {"--api-keys", "sk-secret-0002"}), "each item is key=...,tenant=...");

  RouterOptions valid;
  valid.cluster.cluster_token = "0123456789abcdef";
  ExpectInvalid(valid.Validate(), "model_dir is required");
  valid.model_dir = "/m";
  EXPECT_TRUE(valid.Validate().ok());
  valid.http.listen_port = 70000;
  ExpectInvalid(valid.Validate(), "listen_port");
  valid.http.listen_port = 0;
  valid.cluster.node_dead_after_ms = 100;  // under two heartbeats
  ExpectInvalid(valid.Validate(), "node_dead_after_ms");
}

}  // namespace
}  // namespace tandem::router
