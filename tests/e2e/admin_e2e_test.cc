// Issue 25 item 4 on the real cluster: the router's admin API through tandem-ctl.
// `nodes` lists every node with its role and state; `drain` of a decode node in
// the middle of a stream, with a closed loop of short streams running, stops
// placement on it at once (its granted reservations never grow again), every
// request succeeds with the single-process greedy text, the node shows
// `draining`, finishes its stream, exits 0 and shows `dead`; `ready` names the
// pool that is missing once a node is stopped. A wrong key, an unreachable
// router and an unknown node are clear errors with a nonzero exit status.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/proto/messages.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"
#include "tests/e2e/stream_load.h"
#include "tests/testing/run_command.h"

namespace tandem::e2e {
namespace {

namespace http = tandem::router::testing;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kAdminKey[] = "e2e-admin-key-0123456789abcdef";
constexpr int kLongStreamTokens = 4000;  // keeps the drained node busy while the load runs (context 4096)
constexpr int kStreams = 16;             // clients of the closed loop
constexpr int kMaxTokens = 32;           // per short stream
constexpr int kPrompts = 8;

struct CtlResult {
  int exit_status = -1;
  std::string output;  // stdout and stderr
  json Json() const { return json::parse(output, nullptr, false); }
};

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class AdminE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/tandem-admin-" + std::to_string(getpid());
    std::filesystem::create_directories(root_);
    ASSERT_TRUE(MakeTinyModel(root_ + "/tiny"));
    key_file_ = root_ + "/admin-key";
    std::ofstream(key_file_) << kAdminKey << "\n";
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(root_);
  }

  // The router (with the admin key file), a prefill node and the decode nodes `decode`, ready.
  void StartCluster(const std::vector<std::string>& decode) {
    LocalClusterOptions options;
    options.router_args = {"--admin-key-file", key_file_};
    cluster_ = std::make_unique<LocalCluster>(root_, std::move(options));
    cluster_->StartRouter();
    cluster_->StartNode("p", "prefill", {});
    for (const std::string& name : decode) cluster_->StartNode(name, "decode", {});
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(60))) << cluster_->Logs();
    ASSERT_TRUE(WaitFor([&] { return Nodes().size() == decode.size() + 1 && AllReady(); }, std::chrono::seconds(10)))
        << Ctl("--json nodes").output;
  }

  // tandem-ctl `args` (with `env` variables) against the cluster's router, with the admin key
  // file, unless `args` names a router or a key file.
  CtlResult Ctl(const std::string& args, const std::string& env = "") {
    std::string command = env + " " + BinaryDir() + "/tools/ctl/tandem-ctl";
    if (args.find("--router") == std::string::npos) {
      command += " --router http://127.0.0.1:" + std::to_string(cluster_->http_port());
    }
    if (args.find("--admin-key-file") == std::string::npos) command += " --admin-key-file " + key_file_;
    command += " " + args;
    ::tandem::testing::CommandResult run = ::tandem::testing::RunCommand(command);
    return CtlResult{run.exit_code, std::move(run.output)};
  }
  json Nodes() {
    const json reply = Ctl("--json nodes").Json();
    return reply.is_object() && reply.contains("nodes") ? reply["nodes"] : json::array();
  }
  json Node(const std::string& name) {
    for (const json& node : Nodes()) {
      if (node.value("name", "") == name) return node;
    }
    return json::object();
  }
  bool AllReady() {
    for (const json& node : Nodes()) {
      if (node.value("state", "") != "ready") return false;
    }
    return true;
  }

  std::string root_;
  std::string key_file_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(AdminE2eTest, ListsNodesAndDrainsADecodeNodeUnderLoad) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"d1", "d2"}));
  // nodes: one row per node, roles and states; the JSON carries version and heartbeat.
  CtlResult table = Ctl("nodes");
  ASSERT_EQ(table.exit_status, 0) << table.output;
  for (const char* row : {"d1", "d2", "p"}) EXPECT_NE(table.output.find(row), std::string::npos) << table.output;
  EXPECT_EQ(Node("d1")["role"], "decode");
  EXPECT_EQ(Node("d2")["role"], "decode");
  EXPECT_EQ(Node("p")["role"], "prefill");
  EXPECT_EQ(Node("d1")["protocol_version"], proto::kProtocolVersion);
  EXPECT_FALSE(Node("d1")["version"].get<std::string>().empty());
  EXPECT_GT(Node("d1")["kv"]["gpu_total_blocks"].get<int64_t>(), 0);
  EXPECT_TRUE(Node("d1")["last_heartbeat_ms"].is_number());
  // The key also comes from the environment.
  EXPECT_EQ(Ctl("nodes --admin-key-file ''", std::string("TANDEM_ADMIN_KEY=") + kAdminKey).exit_status, 0);

  // Greedy references of the short streams.
  auto tokenizer = tokenizer::Tokenizer::FromFile(cluster_->model_dir() + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::string> texts;
  for (int p = 0; p < kPrompts; ++p) {
    std::vector<TokenId> prompt(8 + p);
    for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = 40 + (p * 13 + static_cast<int>(j) * 7) % 200;
    texts.push_back(*(*tokenizer)->Decode(ReferenceTokens(cluster_->model_dir(), prompt, kMaxTokens), true));
    prompts.push_back(std::move(prompt));
  }

  // A long stream first: the node decoding it is the one drained, and it stays busy meanwhile.
  const json long_body = {{"model", "tiny"},  {"prompt", prompts[0]}, {"max_tokens", kLongStreamTokens},
                          {"temperature", 0}, {"ignore_eos", true},   {"stream", true}};
  const uint16_t port = cluster_->http_port();
  std::future<http::HttpResult> long_stream =
      std::async(std::launch::async, [port, long_body] { return http::Post(port, "/v1/completions", long_body); });
  std::string drained;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const char* name : {"d1", "d2"}) {
          if (cluster_->Metric(name, "tandem_generation_tokens_total") > 0) drained = name;
        }
        return !drained.empty();
      },
      std::chrono::seconds(20)))
      << cluster_->Logs();
  const std::string other = drained == "d1" ? "d2" : "d1";

  StreamLoad load(
      port, kStreams,
      [&](int i) {
        return json{{"model", "tiny"},          {"prompt", prompts[i % kPrompts]},
                    {"max_tokens", kMaxTokens}, {"temperature", 0},
                    {"ignore_eos", true},       {"stream", true}};
      },
      [&](int i) { return texts[i % kPrompts]; });
  load.Start();
  ASSERT_TRUE(WaitFor([&] { return load.result().served >= kStreams; }, std::chrono::seconds(60)));

  const auto drain_start = Clock::now();
  auto since_drain = [&] { return std::chrono::duration<double>(Clock::now() - drain_start).count(); };
  CtlResult drain = Ctl("drain " + drained);
  ASSERT_EQ(drain.exit_status, 0) << drain.output;
  EXPECT_NE(drain.output.find("is draining"), std::string::npos) << drain.output;
  EXPECT_EQ(Node(drained)["state"], "draining");
  const int served_at_drain = load.result().served;

  // Watch the drained node until it exits. The Reserves it grants or refuses settle within
  // a moment of the drain (the router may have sent one just before) and then never grow:
  // the router sends it nothing new while the load runs on the other node. (That the router
  // stops at once, before the node's heartbeat says draining, is its `draining` state above;
  // router_cluster_test's ClusterAdminHttpTest checks placement itself.)
  const std::string granted = "outcome=\"granted\"";
  const std::string refused = "outcome=\"refused\"";
  struct Sample {
    double at_s, granted, refused;
  };
  std::vector<Sample> settled;  // from 0.2 s after the drain on
  for (std::string page; since_drain() < 60 && !(page = cluster_->MetricsPage(drained)).empty();) {
    const double at = since_drain();
    if (at >= 0.2) {
      settled.push_back({at, LocalCluster::MetricIn(page, "tandem_kv_reservations_total", granted),
                         LocalCluster::MetricIn(page, "tandem_kv_reservations_total", refused)});
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double drain_s = since_drain();
  const int served_during_drain = load.result().served - served_at_drain;
  ASSERT_GE(settled.size(), 2u) << "the drained node left within 0.2 s: lengthen its stream";
  for (const Sample& sample : settled) {
    EXPECT_EQ(sample.granted, settled.front().granted) << "work went to the drained node " << sample.at_s << " s after";
    EXPECT_EQ(sample.refused, settled.front().refused) << "work went to the drained node " << sample.at_s << " s after";
  }
  EXPECT_GT(served_during_drain, 0) << "the load stalled during the drain";

  load.Stop(std::chrono::seconds(120));
  const StreamLoad::Result result = load.result();
  std::string failures;
  for (const std::string& f : result.failures) failures += "\n  " + f;
  EXPECT_EQ(result.failed, 0) << result.failed << " of " << load.sent() << " failed" << failures;

  // The drained node's own stream finished there; it exited 0 and shows dead.
  ASSERT_EQ(long_stream.wait_for(std::chrono::seconds(120)), std::future_status::ready);
  const http::HttpResult r = long_stream.get();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("\"error\""), std::string::npos) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(cluster_->procs().Wait(drained, std::chrono::seconds(30)), 0) << "drained node exit status";
  ASSERT_TRUE(WaitFor([&] { return Node(drained)["state"] == "dead"; }, std::chrono::seconds(5))) << Nodes();
  EXPECT_NE(Node(drained)["dead_reason"].get<std::string>().find("while draining"), std::string::npos) << Nodes();
  EXPECT_EQ(Node(other)["state"], "ready");
  std::printf(
      "drained %s via tandem-ctl: %d streams served, %d during its drain of %.2f s (%zu checks of no new "
      "work)\n",
      drained.c_str(), result.served, served_during_drain, drain_s, settled.size());
}

TEST_F(AdminE2eTest, ReadinessNamesTheMissingPoolAndErrorsAreClear) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"d1"}));
  CtlResult ready = Ctl("ready");
  EXPECT_EQ(ready.exit_status, 0) << ready.output;
  EXPECT_NE(ready.output.find("cluster: ready"), std::string::npos) << ready.output;

  // Clear errors, nonzero exit.
  CtlResult wrong = Ctl("nodes --admin-key-file ''", "TANDEM_ADMIN_KEY=wrong-admin-key-0123456789");
  EXPECT_EQ(wrong.exit_status, 1);
  EXPECT_NE(wrong.output.find("refused the admin key (401)"), std::string::npos) << wrong.output;
  CtlResult none = Ctl("nodes --admin-key-file ''", "TANDEM_ADMIN_KEY=");
  EXPECT_EQ(none.exit_status, 1);
  EXPECT_NE(none.output.find("no admin key"), std::string::npos) << none.output;
  CtlResult unknown = Ctl("drain nobody");
  EXPECT_EQ(unknown.exit_status, 1);
  EXPECT_NE(unknown.output.find("no live node with id, name or address 'nobody'"), std::string::npos) << unknown.output;
  CtlResult unreachable = Ctl("nodes --router http://127.0.0.1:" + std::to_string(FreePort()));
  EXPECT_EQ(unreachable.exit_status, 1);
  EXPECT_NE(unreachable.output.find("cannot reach the router"), std::string::npos) << unreachable.output;
  EXPECT_EQ(Ctl("frobnicate").exit_status, 2);

  // The prefill node stops: the cluster still serves (decode prefills), but the pool is missing.
  cluster_->procs().Signal("p", SIGTERM);
  ASSERT_EQ(cluster_->procs().Wait("p", std::chrono::seconds(30)), 0);
  ASSERT_TRUE(WaitFor([&] { return Ctl("ready").exit_status == 1; }, std::chrono::seconds(5)));
  ready = Ctl("ready");
  EXPECT_NE(ready.output.find("NOT READY (no ready prefill node)"), std::string::npos) << ready.output;
  json verdict = Ctl("--json ready").Json();
  EXPECT_EQ(verdict["missing"], json({"prefill"})) << verdict;
  EXPECT_EQ(verdict["serving"], true);
  EXPECT_EQ(Node("p")["state"], "dead");

  // Then the decode node: nothing serves.
  cluster_->procs().Signal("d1", SIGTERM);
  ASSERT_EQ(cluster_->procs().Wait("d1", std::chrono::seconds(30)), 0);
  ASSERT_TRUE(WaitFor([&] { return Ctl("--json ready").Json()["missing"].size() == 2; }, std::chrono::seconds(5)));
  verdict = Ctl("--json ready").Json();
  EXPECT_EQ(verdict["missing"], json({"decode", "prefill"})) << verdict;
  EXPECT_EQ(verdict["serving"], false);
  EXPECT_NE(Ctl("ready").output.find("no ready decode node; no ready prefill node"), std::string::npos);
}

}  // namespace
}  // namespace tandem::e2e
