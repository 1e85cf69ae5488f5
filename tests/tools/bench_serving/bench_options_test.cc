#include "tools/bench_serving/bench_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem::bench {
namespace {

StatusOr<BenchCommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tandem-bench-serving");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseBenchFlags(static_cast<int>(argv.size()), argv.data());
}

// The error message of a command line that must be refused.
std::string Refusal(std::vector<std::string> args) {
  auto cmd = Parse(std::move(args));
  EXPECT_FALSE(cmd.ok());
  return cmd.ok() ? "" : cmd.status().message();
}

TEST(BenchOptionsTest, LongRandomPromptsAreNotCutByTheDefaultCap) {
  auto cmd = Parse({"--input-len", "4096", "--output-len", "32"});
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  EXPECT_EQ(cmd->options.max_input_len, 4096);
  EXPECT_EQ(cmd->options.max_output_len, 32);
  EXPECT_NE(DescribeWorkload(cmd->options).find("prompt 4096..4096 tokens, completion 32..32 tokens"),
            std::string::npos)
      << DescribeWorkload(cmd->options);
}

TEST(BenchOptionsTest, RangeRatioWidensTheCapToTheUpperEnd) {
  auto cmd = Parse({"--input-len", "1000", "--range-ratio", "0.5"});
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  EXPECT_EQ(cmd->options.max_input_len, 1500);
  EXPECT_EQ(RandomLengthRange(1000, 0.5).lo, 500);
  EXPECT_EQ(RandomLengthRange(1, 0.9).lo, 1);
}

TEST(BenchOptionsTest, ExplicitCapBelowTheAskedLengthIsAnError) {
  std::string msg = Refusal({"--input-len", "4096", "--max-input-len", "1024"});
  EXPECT_NE(msg.find("--input-len 4096"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--max-input-len is 1024"), std::string::npos) << msg;
  msg = Refusal({"--input-len", "100", "--range-ratio", "0.5", "--max-input-len", "120"});
  EXPECT_NE(msg.find("up to 150 tokens"), std::string::npos) << msg;
  msg = Refusal({"--output-len", "64", "--max-output-len", "32"});
  EXPECT_NE(msg.find("--max-output-len is 32"), std::string::npos) << msg;
  EXPECT_TRUE(Parse({"--input-len", "1000", "--max-input-len", "1000"}).ok());
}

TEST(BenchOptionsTest, ShareGptShapedKeepsItsCapsAndRefusesRandomLengths) {
  auto cmd = Parse({"--dataset", "sharegpt-shaped"});
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  EXPECT_EQ(cmd->options.max_input_len, 1024);
  EXPECT_EQ(cmd->options.max_output_len, 512);
  EXPECT_NE(
      Refusal({"--dataset", "sharegpt-shaped", "--input-len", "10"}).find("--input-len applies to --dataset random"),
      std::string::npos);
  EXPECT_NE(Refusal({"--dataset", "sharegpt-shaped", "--range-ratio", "0.1"}).find("--range-ratio"), std::string::npos);
}

TEST(BenchOptionsTest, IgnoredOrOutOfRangeOptionsAreErrors) {
  EXPECT_NE(Refusal({"--request-rate", "5", "--concurrency", "4"}).find("--concurrency 4 applies when"),
            std::string::npos);
  EXPECT_TRUE(Parse({"--request-rate", "0", "--concurrency", "4"}).ok());
  EXPECT_NE(Refusal({"--api", "chat", "--vocab-size", "500"}).find("--vocab-size applies to --api completions"),
            std::string::npos);
  EXPECT_NE(Refusal({"--range-ratio", "1.5"}).find("[0, 1)"), std::string::npos);
  EXPECT_NE(Refusal({"--vocab-size", "3"}).find(">= 4"), std::string::npos);
  EXPECT_NE(Refusal({"--no-such-flag"}).find("command line"), std::string::npos);
  EXPECT_NE(Refusal({"--metrics-url", "ftp://x/metrics"}).find("not an http:// URL"), std::string::npos);
  EXPECT_NE(Refusal({"--metrics-url", "http://x:port/metrics"}).find("malformed URL"), std::string::npos);
}

TEST(BenchOptionsTest, DefaultsGoodputSloAndMetricsPages) {
  auto cmd = Parse({"--host", "10.0.0.1", "--port", "8100", "--metrics-url", "decode=http://127.0.0.1:9101/metrics",
                    "--metrics-url", "http://10.0.0.2:9201/metrics"});
  ASSERT_TRUE(cmd.ok()) << cmd.status().ToString();
  const BenchOptions& o = cmd->options;
  EXPECT_DOUBLE_EQ(o.limits.ttft_ms, 500);
  EXPECT_DOUBLE_EQ(o.limits.tpot_ms, 50);
  EXPECT_EQ(o.endpoint.path, "/v1/completions");
  ASSERT_EQ(o.metrics_sources.size(), 3u);
  EXPECT_EQ(o.metrics_sources[0].name, "router");
  EXPECT_EQ(o.metrics_sources[0].page.host, "10.0.0.1");
  EXPECT_EQ(o.metrics_sources[0].page.port, "8100");
  EXPECT_EQ(o.metrics_sources[0].page.path, "/metrics");
  EXPECT_EQ(o.metrics_sources[1].name, "decode");
  EXPECT_EQ(o.metrics_sources[1].page.port, "9101");
  EXPECT_EQ(o.metrics_sources[2].name, "10.0.0.2:9201");
  EXPECT_EQ(o.metrics_sources[2].page.path, "/metrics");

  auto none = Parse({"--no-router-metrics", "--api", "chat"});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->options.metrics_sources.empty());
  EXPECT_EQ(none->options.endpoint.path, "/v1/chat/completions");
}

TEST(BenchOptionsTest, HelpSaysTheCapFollowsInputLen) {
  auto cmd = Parse({"--help"});
  ASSERT_TRUE(cmd.ok());
  EXPECT_TRUE(cmd->help_requested);
  EXPECT_NE(cmd->help.find("follows --input-len"), std::string::npos);
}

}  // namespace
}  // namespace tandem::bench
