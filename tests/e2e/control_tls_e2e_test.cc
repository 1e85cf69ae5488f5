// Mutual TLS on the control plane of the real cluster: tandem-router,
// tandem-prefill and tandem-decode with certificates from a throwaway CA (made
// here with the openssl CLI) serve a correct greedy completion (node -> router
// and prefill -> decode links both under TLS). A decode node whose certificate
// comes from another CA, and one without TLS, never register: the router counts
// only the good nodes and they serve nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"

namespace tandem::e2e {
namespace {

namespace fs = std::filesystem;
namespace http = tandem::router::testing;
using nlohmann::json;

// ca.pem + {router,prefill,decode}.{pem,key} signed by it (SAN IP:127.0.0.1,
// serverAuth + clientAuth), and rogue.{pem,key} signed by other_ca.pem.
bool MakeCertificates(const fs::path& dir) {
  std::ofstream(dir / "leaf.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  << "extendedKeyUsage=serverAuth,clientAuth\n";
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string ca_ext = " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
  std::string script = "set -e; cd " + dir.string() + ";";
  script += "openssl req -x509" + key + ca_ext + " -keyout ca.key -out ca.pem -days 1 -subj /CN=TandemE2eCA;";
  script += "openssl req -x509" + key + ca_ext + " -keyout other_ca.key -out other_ca.pem -days 1 -subj /CN=OtherCA;";
  auto leaf = [&](const std::string& name, const std::string& ca) {
    script += "openssl req" + key + " -keyout " + name + ".key -out " + name + ".csr -subj /CN=" + name + ";";
    script += "openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca + ".key -CAcreateserial -out " +
              name + ".pem -days 1 -extfile leaf.ext;";
  };
  leaf("router", "ca");
  leaf("prefill", "ca");
  leaf("decode", "ca");
  leaf("rogue", "other_ca");
  const std::string command = "sh -c '" + script + "' > " + (dir / "openssl.log").string() + " 2>&1";
  return std::system(command.c_str()) == 0;
}

std::vector<std::string> TlsFlags(const fs::path& dir, const std::string& name) {
  return {"--control-tls-enabled",   "true",
          "--control-tls-cert-file", (dir / (name + ".pem")).string(),
          "--control-tls-key-file",  (dir / (name + ".key")).string(),
          "--control-tls-ca-file",   (dir / "ca.pem").string()};
}

TEST(ControlTlsE2eTest, MutualTlsClusterServesAndRefusesForeignOrPlainNodes) {
  const fs::path root = fs::path(::testing::TempDir()) / ("tandem-tls-e2e-" + std::to_string(getpid()));
  fs::create_directories(root);
  ASSERT_TRUE(MakeCertificates(root)) << "openssl CLI failed; see " << (root / "openssl.log");
  ASSERT_TRUE(MakeTinyModel((root / "tiny").string()));

  LocalClusterOptions options;
  options.router_args = TlsFlags(root, "router");
  LocalCluster cluster(root.string(), options);
  cluster.StartRouter();
  cluster.StartNode("decode", "decode", TlsFlags(root, "decode"));
  cluster.StartNode("prefill", "prefill", TlsFlags(root, "prefill"));
  // A decode node with a certificate from another CA (it trusts the right CA, so
  // only the router's check of its client certificate can stop it), and one
  // without TLS. Both retry every 100 ms.
  std::vector<std::string> rogue = TlsFlags(root, "rogue");
  rogue.insert(rogue.end(), {"--reconnect-interval-ms", "100"});
  cluster.StartNode("rogue", "decode", rogue, /*expect_ready=*/false);
  cluster.StartNode("plain", "decode", {"--reconnect-interval-ms", "100"}, /*expect_ready=*/false);
  ASSERT_TRUE(cluster.WaitReady(std::chrono::seconds(30))) << cluster.Logs();

  // Greedy output through router -> prefill -> UCX -> decode equals one process.
  auto tokenizer = tokenizer::Tokenizer::FromFile(cluster.model_dir() + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  std::vector<TokenId> prompt(40);
  for (int i = 0; i < 40; ++i) prompt[i] = 40 + (i * 11) % 200;
  const std::string expected =
      *(*tokenizer)->Decode(ReferenceTokens(cluster.model_dir(), prompt, 8), /*skip_special_tokens=*/true);
  json body = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};
  for (int i = 0; i < 3; ++i) {
    http::HttpResult r = http::Post(cluster.http_port(), "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body << "\n" << cluster.Logs();
    EXPECT_EQ(r.Json()["choices"][0]["text"], expected) << "request " << i;
    EXPECT_EQ(r.Json()["usage"]["completion_tokens"], 8);
  }
  EXPECT_GT(cluster.Metric("prefill", "tandem_kv_transfer_bytes_total"), 0) << "prefill -> decode went over TLS";
  EXPECT_EQ(cluster.Metric("decode", "tandem_kv_reservations_total", "outcome=\"granted\""), 3);

  // The refused nodes are up (their router link retries every 100 ms); give them
  // ten more attempts, then check that none got through.
  for (const char* name : {"rogue", "plain"}) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (LocalCluster::Get(cluster.node_http_port(name), "/health/live").status != 200 &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  for (const char* name : {"rogue", "plain"}) {
    ASSERT_EQ(LocalCluster::Get(cluster.node_http_port(name), "/health/live").status, 200) << name << " is not up";
    EXPECT_NE(LocalCluster::Get(cluster.node_http_port(name), "/health/ready").status, 200) << name;
    EXPECT_EQ(cluster.Metric(name, "tandem_node_ready"), 0) << name;
    EXPECT_EQ(cluster.Metric(name, "tandem_kv_reservations_total"), 0) << name << " served a request";
    EXPECT_EQ(cluster.Metric(name, "tandem_generation_tokens_total"), 0) << name << " served a request";
  }
  EXPECT_EQ(cluster.Metric("router", "tandem_router_nodes", "role=\"decode\""), 1) << cluster.Logs();
  EXPECT_EQ(cluster.Metric("router", "tandem_router_nodes", "role=\"prefill\""), 1) << cluster.Logs();
  EXPECT_EQ(cluster.procs().FullLog("router").find("rogue"), std::string::npos) << "rogue registered";
  EXPECT_EQ(cluster.procs().FullLog("rogue").find("registered with router"), std::string::npos);
  EXPECT_EQ(cluster.procs().FullLog("plain").find("registered with router"), std::string::npos);
  EXPECT_NE(cluster.procs().FullLog("decode").find("registered with router"), std::string::npos);
  for (const char* name : {"router", "decode", "prefill"}) {
    EXPECT_NE(cluster.procs().FullLog(name).find("(TLS)"), std::string::npos) << name << " control server without TLS";
  }

  cluster.procs().StopAll();
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace
}  // namespace tandem::e2e
