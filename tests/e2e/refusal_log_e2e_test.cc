// Every refusal is logged on both sides with the reason (issue 27 item 6), on the
// real processes: a decode node with the wrong cluster token (refused in the
// control Hello) and one whose KV layout differs from the cluster's (refused at
// registration) retry every 100 ms; the router's log and each refused node's log
// name the reason, and a refusal that repeats is logged once per 10 s, not at
// every attempt.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/e2e/local_cluster.h"

namespace tandem::e2e {
namespace {

// Occurrences of `needle` in `text`.
int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(RefusalLogE2eTest, WrongTokenAndLayoutMismatchAreLoggedOnBothSides) {
  const std::string root = ::testing::TempDir() + "/tandem-refusals-" + std::to_string(getpid());
  std::filesystem::create_directories(root);
  ASSERT_TRUE(MakeTinyModel(root + "/tiny"));
  LocalCluster cluster(root);
  cluster.StartRouter();
  cluster.StartNode("decode", "decode", {});
  ASSERT_TRUE(cluster.WaitReady(std::chrono::seconds(30))) << cluster.Logs();
  // Started after the good node registered, so the cluster's layout is the good node's.
  cluster.StartNode("intruder", "decode",
                    {"--cluster-token", "not-the-cluster-token-0123456789", "--reconnect-interval-ms", "100"},
                    /*expect_ready=*/false);
  cluster.StartNode("odd", "decode", {"--kv-block-size", "32", "--reconnect-interval-ms", "100"},
                    /*expect_ready=*/false);
  auto logged = [&] {
    const std::string router = cluster.procs().FullLog("router");
    return router.find("wrong cluster token") != std::string::npos && router.find("KV layout") != std::string::npos &&
           cluster.procs().FullLog("intruder").find("wrong cluster token") != std::string::npos &&
           cluster.procs().FullLog("odd").find("KV layout") != std::string::npos;
  };
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!logged() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(logged()) << cluster.Logs();
  // A second of retries (about 10 each) adds no lines: the next report comes after 10 s.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const std::string router = cluster.procs().FullLog("router");
  EXPECT_EQ(Occurrences(router, "refused control connection from 127.0.0.1: PERMISSION_DENIED: wrong cluster token"), 1)
      << router;
  EXPECT_EQ(Occurrences(router, "refused registration of node 'odd'"), 1) << router;
  EXPECT_NE(router.find("block_size: 32"), std::string::npos) << router;
  const std::string intruder = cluster.procs().FullLog("intruder");
  EXPECT_EQ(Occurrences(intruder, "cannot register with router"), 1) << intruder;
  EXPECT_NE(intruder.find("wrong cluster token"), std::string::npos) << intruder;
  EXPECT_EQ(intruder.find("not-the-cluster-token"), std::string::npos) << "the token reached the log";
  const std::string odd = cluster.procs().FullLog("odd");
  EXPECT_EQ(Occurrences(odd, "cannot register with router"), 1) << odd;
  EXPECT_NE(odd.find("block_size: 32"), std::string::npos) << odd;
  EXPECT_EQ(cluster.Metric("router", "tandem_router_nodes", "role=\"decode\""), 1);

  cluster.procs().StopAll();
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
}

}  // namespace
}  // namespace tandem::e2e
