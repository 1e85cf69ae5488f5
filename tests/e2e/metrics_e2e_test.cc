// docs/metrics.md on the real cluster: tandem-router, tandem-prefill and
// tandem-decode (deploy/*.yaml) on loopback serve kRemote requests prefilled on
// the prefill node and kLocal short ones prefilled on the decode node; then
// each process exports exactly the families the doc gives it, every counter
// and histogram moved by what those requests did (counts equal to the request
// numbers, token sums equal to the prompts and outputs), the gauges are back to
// 0, and promtool accepts every page.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/local_cluster.h"
#include "tests/router/test_http_client.h"

namespace tandem::e2e {
namespace {

namespace http = tandem::router::testing;
using nlohmann::json;

constexpr int kRemote = 4;  // prompts of kRemoteLen tokens: prefilled on the prefill node
constexpr int kLocal = 2;   // prompts of kLocalLen tokens: prefilled on the decode node
constexpr int kRemoteLen = 40;
constexpr int kLocalLen = 5;
constexpr int kLocalMax = 8;  // --local-prefill-max-tokens
constexpr int kMaxTokens = 6;
constexpr int kAll = kRemote + kLocal;

// The families each process exports (docs/metrics.md).
const std::set<std::string> kRouterFamilies = {"tandem_time_to_first_token_seconds",
                                               "tandem_inter_token_latency_seconds",
                                               "tandem_time_per_output_token_seconds",
                                               "tandem_request_time_per_output_token_seconds",
                                               "tandem_e2e_request_latency_seconds",
                                               "tandem_request_queue_time_seconds",
                                               "tandem_request_prompt_tokens",
                                               "tandem_request_generation_tokens",
                                               "tandem_num_requests_running",
                                               "tandem_num_requests_waiting",
                                               "tandem_prompt_tokens_total",
                                               "tandem_generation_tokens_total",
                                               "tandem_request_success_total",
                                               "tandem_requests_rejected_total",
                                               "tandem_router_nodes",
                                               "tandem_router_node_cached_blocks",
                                               "tandem_router_pool_queued_requests",
                                               "tandem_router_pool_inflight_prefill_tokens",
                                               "tandem_router_pool_batch_occupancy",
                                               "tandem_router_pool_kv_headroom",
                                               "tandem_router_pool_waiting_for_room"};
const std::set<std::string> kPrefillFamilies = {
    "tandem_request_queue_time_seconds", "tandem_request_prefill_time_seconds", "tandem_iteration_tokens",
    "tandem_kv_transfer_seconds",        "tandem_kv_transfer_bytes_total",      "tandem_num_requests_running",
    "tandem_num_requests_waiting",       "tandem_kv_cache_usage_ratio",         "tandem_kv_blocks_referenced",
    "tandem_prompt_tokens_total",        "tandem_generation_tokens_total",      "tandem_prefix_cache_queries_total",
    "tandem_prefix_cache_hits_total",    "tandem_num_preemptions_total",        "tandem_cache_config_info",
    "tandem_kv_transfer_sessions",       "tandem_kv_transfer_blocks_in_use",    "tandem_node_ready",
    "tandem_engine_cpu_seconds_total",   "tandem_engine_runqueue_wait_seconds_total"};
std::set<std::string> DecodeFamilies() {
  std::set<std::string> f = kPrefillFamilies;
  f.insert({"tandem_request_decode_time_seconds", "tandem_kv_handoff_wait_seconds", "tandem_kv_reservations_active",
            "tandem_kv_reservations_total"});
  return f;
}

std::set<std::string> ExportedFamilies(const std::string& page) {
  std::set<std::string> families;
  std::regex type(R"(^# TYPE (tandem_[a-z0-9_]+) [a-z]+$)");
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, type)) families.insert(m[1]);
  }
  return families;
}

// `promtool check metrics` exit status over `page`; 0 when promtool is missing.
int Promtool(const std::string& page, std::string* output) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) return 0;
  std::string path = ::testing::TempDir() + "/metrics_e2e_" + std::to_string(getpid()) + ".prom";
  std::ofstream(path) << page;
  FILE* pipe = popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  char buf[512];
  while (pipe && fgets(buf, sizeof(buf), pipe)) *output += buf;
  int rc = pipe ? pclose(pipe) : -1;
  std::filesystem::remove(path);
  return rc;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

std::vector<int> Prompt(int length, int salt) {
  std::vector<int> p(length);
  for (int i = 0; i < length; ++i) p[i] = 40 + (i * 7 + salt * 13) % 200;
  return p;
}

class MetricsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/tandem-metrics-e2e-" + std::to_string(getpid());
    std::filesystem::create_directories(root_);
    ASSERT_TRUE(MakeTinyModel(root_ + "/tiny"));
    LocalClusterOptions options;
    options.router_args = {"--local-prefill-max-tokens", std::to_string(kLocalMax)};
    cluster_ = std::make_unique<LocalCluster>(root_, options);
    cluster_->Start();
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
  }
  void TearDown() override {
    cluster_.reset();
    std::filesystem::remove_all(root_);
  }

  double M(const std::string& process, const std::string& series, const std::string& labels = "") {
    return cluster_->Metric(process, series, labels);
  }

  std::string root_;
  std::unique_ptr<LocalCluster> cluster_;
};

TEST_F(MetricsE2eTest, EveryFamilyMovesAsDocumentedOnRouterPrefillAndDecode) {
  // The router counts both nodes before the first request is placed.
  ASSERT_TRUE(WaitFor([&] {
    return M("router", "tandem_router_nodes", "role=\"prefill\"") == 1 &&
           M("router", "tandem_router_nodes", "role=\"decode\"") == 1;
  })) << cluster_->Logs();
  for (int i = 0; i < kAll; ++i) {
    const bool remote = i < kRemote;
    json body = {{"model", "tiny"},
                 {"prompt", Prompt(remote ? kRemoteLen : kLocalLen, i)},
                 {"max_tokens", kMaxTokens},
                 {"temperature", 0},
                 {"ignore_eos", true}};
    http::HttpResult r = http::Post(cluster_->http_port(), "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body << cluster_->Logs();
    ASSERT_EQ(r.Json()["usage"]["completion_tokens"], kMaxTokens);
  }
  const int prompt_tokens = kRemote * kRemoteLen + kLocal * kLocalLen;
  const int output_tokens = kAll * kMaxTokens;

  // Idle: every gauge of work in flight is back to 0.
  const std::string router = "router", prefill = "prefill", decode = "decode";
  for (const std::string& p : {router, prefill, decode}) {
    EXPECT_TRUE(WaitFor([&] {
      return M(p, "tandem_num_requests_running") == 0 && M(p, "tandem_num_requests_waiting") == 0 &&
             M(p, "tandem_kv_blocks_referenced") == 0 && M(p, "tandem_kv_reservations_active") == 0 &&
             M(p, "tandem_kv_transfer_sessions") == 0 && M(p, "tandem_kv_transfer_blocks_in_use") == 0;
    })) << p
        << "\n"
        << cluster_->MetricsPage(p);
  }

  // Each process exports its own families and no other; promtool accepts every page.
  const std::map<std::string, std::set<std::string>> families = {
      {router, kRouterFamilies}, {prefill, kPrefillFamilies}, {decode, DecodeFamilies()}};
  for (const auto& [process, expected] : families) {
    const std::string page = cluster_->MetricsPage(process);
    EXPECT_EQ(ExportedFamilies(page), expected) << process;
    std::string output;
    EXPECT_EQ(Promtool(page, &output), 0) << process << ": " << output;
    // Every serving series names the model (the plumbing gauges and cluster gauges do not).
    std::istringstream in(page);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#' || line.rfind("tandem_router_node", 0) == 0 ||
          line.rfind("tandem_router_pool", 0) == 0 ||
          line.rfind("tandem_kv_transfer_sessions", 0) == 0 || line.rfind("tandem_kv_transfer_blocks", 0) == 0 ||
          line.rfind("tandem_node_ready", 0) == 0 || line.rfind("tandem_engine_", 0) == 0 ||
          line.rfind("process_", 0) == 0) {
        continue;
      }
      EXPECT_NE(line.find("model_name=\"tiny\""), std::string::npos) << process << ": " << line;
    }
  }

  // What each process cost its host: CPU time and memory; on a node, the engine thread's
  // share of the CPU (its steps) is part of the process's.
  for (const std::string& p : {router, prefill, decode}) {
    EXPECT_GT(M(p, "process_cpu_seconds_total"), 0) << p;
    EXPECT_GT(M(p, "process_resident_memory_bytes"), 1 << 20) << p;
  }
  for (const std::string& p : {prefill, decode}) {
    const double engine = M(p, "tandem_engine_cpu_seconds_total");
    EXPECT_GT(engine, 0) << p;
    EXPECT_LE(engine, M(p, "process_cpu_seconds_total")) << p;
  }

  // Router: what clients saw.
  EXPECT_EQ(M(router, "tandem_request_success_total", "finished_reason=\"length\""), kAll);
  EXPECT_EQ(M(router, "tandem_request_success_total"), kAll);
  EXPECT_EQ(M(router, "tandem_requests_rejected_total"), 0);
  EXPECT_EQ(M(router, "tandem_time_to_first_token_seconds_count"), kAll);
  EXPECT_GT(M(router, "tandem_time_to_first_token_seconds_sum"), 0);
  EXPECT_EQ(M(router, "tandem_e2e_request_latency_seconds_count"), kAll);
  EXPECT_GT(M(router, "tandem_e2e_request_latency_seconds_sum"), 0);
  EXPECT_EQ(M(router, "tandem_inter_token_latency_seconds_count"), kAll * (kMaxTokens - 1));
  EXPECT_GT(M(router, "tandem_inter_token_latency_seconds_sum"), 0);
  EXPECT_EQ(M(router, "tandem_time_per_output_token_seconds_count"), kAll * (kMaxTokens - 1));
  EXPECT_EQ(M(router, "tandem_request_time_per_output_token_seconds_count"), kAll);
  EXPECT_GT(M(router, "tandem_request_time_per_output_token_seconds_sum"), 0);
  EXPECT_EQ(M(router, "tandem_request_queue_time_seconds_count", "stage=\"router\""), kAll);
  EXPECT_EQ(M(router, "tandem_request_prompt_tokens_count"), kAll);
  EXPECT_EQ(M(router, "tandem_request_prompt_tokens_sum"), prompt_tokens);
  EXPECT_EQ(M(router, "tandem_request_generation_tokens_count"), kAll);
  EXPECT_EQ(M(router, "tandem_request_generation_tokens_sum"), output_tokens);
  EXPECT_EQ(M(router, "tandem_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(M(router, "tandem_generation_tokens_total"), output_tokens);
  EXPECT_EQ(M(router, "tandem_router_nodes", "role=\"decode\""), 1);

  // Prefill node: the kRemote prompts, one step each, their first tokens and KV sent.
  EXPECT_EQ(M(prefill, "tandem_request_queue_time_seconds_count", "stage=\"prefill\""), kRemote)
      << "remote prompts prefilled elsewhere; the logs say why:\n"
      << cluster_->Logs();
  EXPECT_GT(M(prefill, "tandem_request_queue_time_seconds_sum"), 0);
  EXPECT_EQ(M(prefill, "tandem_request_prefill_time_seconds_count"), kRemote);
  EXPECT_GT(M(prefill, "tandem_request_prefill_time_seconds_sum"), 0);
  EXPECT_EQ(M(prefill, "tandem_iteration_tokens_count"), kRemote);
  EXPECT_EQ(M(prefill, "tandem_iteration_tokens_sum"), kRemote * kRemoteLen);
  EXPECT_EQ(M(prefill, "tandem_kv_transfer_seconds_count"), kRemote);
  EXPECT_GT(M(prefill, "tandem_kv_transfer_seconds_sum"), 0);
  const double sent = M(prefill, "tandem_kv_transfer_bytes_total", "direction=\"sent\"");
  EXPECT_GT(sent, 0);
  EXPECT_EQ(M(prefill, "tandem_prompt_tokens_total"), kRemote * kRemoteLen);
  EXPECT_EQ(M(prefill, "tandem_prefix_cache_queries_total"), kRemote * kRemoteLen);
  EXPECT_EQ(M(prefill, "tandem_prefix_cache_hits_total"), 0);
  EXPECT_EQ(M(prefill, "tandem_generation_tokens_total"), kRemote);
  EXPECT_EQ(M(prefill, "tandem_num_preemptions_total"), 0);
  EXPECT_EQ(M(prefill, "tandem_cache_config_info", "block_size=\"16\",num_gpu_blocks=\"512\",num_cpu_blocks=\"256\""),
            1);
  EXPECT_EQ(M(prefill, "tandem_node_ready"), 1);

  // Decode node: every request decoded; the remote ones waited for their KV, the
  // local ones prefilled here (their prompt, then one token per step).
  EXPECT_EQ(M(decode, "tandem_request_queue_time_seconds_count", "stage=\"decode\""), kAll);
  EXPECT_GT(M(decode, "tandem_request_queue_time_seconds_sum"), 0);
  EXPECT_EQ(M(decode, "tandem_request_prefill_time_seconds_count"), kLocal);
  EXPECT_GT(M(decode, "tandem_request_prefill_time_seconds_sum"), 0);
  EXPECT_EQ(M(decode, "tandem_request_decode_time_seconds_count"), kAll);
  EXPECT_GT(M(decode, "tandem_request_decode_time_seconds_sum"), 0);
  EXPECT_EQ(M(decode, "tandem_kv_handoff_wait_seconds_count"), kRemote);
  EXPECT_GT(M(decode, "tandem_kv_handoff_wait_seconds_sum"), 0);
  EXPECT_EQ(M(decode, "tandem_kv_transfer_seconds_count"), kRemote);
  EXPECT_GT(M(decode, "tandem_kv_transfer_seconds_sum"), 0);
  EXPECT_EQ(M(decode, "tandem_kv_transfer_bytes_total", "direction=\"received\""), sent);
  EXPECT_EQ(M(decode, "tandem_kv_reservations_total", "outcome=\"granted\""), kRemote);
  EXPECT_EQ(M(decode, "tandem_kv_reservations_total"), kRemote);
  EXPECT_EQ(M(decode, "tandem_iteration_tokens_count"), kRemote * (kMaxTokens - 1) + kLocal * kMaxTokens);
  EXPECT_EQ(M(decode, "tandem_iteration_tokens_sum"),
            kRemote * (kMaxTokens - 1) + kLocal * (kLocalLen + kMaxTokens - 1));
  EXPECT_EQ(M(decode, "tandem_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(M(decode, "tandem_generation_tokens_total"), output_tokens);
  EXPECT_EQ(M(decode, "tandem_num_preemptions_total"), 0);
  EXPECT_EQ(M(decode, "tandem_cache_config_info", "num_gpu_blocks=\"512\""), 1);
  EXPECT_EQ(M(decode, "tandem_node_ready"), 1);
}

}  // namespace
}  // namespace tandem::e2e
