// tandem-bench-serving: a load generator for any OpenAI-compatible endpoint.
//
// Sends streaming requests at a Poisson rate (--request-rate) or with a fixed
// number in flight (--concurrency), with random or ShareGPT-shaped lengths, and
// prints TTFT, TPOT, ITL and e2e percentiles, throughput and goodput.
//
//   tandem-bench-serving --port 8000 --model tiny --num-prompts 200 --request-rate 20
//       --dataset sharegpt-shaped --goodput-ttft-ms 200 --goodput-tpot-ms 50   (one command)
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "tools/bench_serving/serving_stats.h"
#include "tools/bench_serving/sse_client.h"

namespace tandem::bench {
namespace {

struct Options {
  Endpoint endpoint;
  std::string api = "completions";  // completions | chat
  std::string model = "tiny";
  int num_prompts = 100;
  double request_rate = 0;  // requests/s; 0 = use --concurrency
  int concurrency = 8;
  std::string dataset = "random";  // random | sharegpt-shaped
  int input_len = 128, output_len = 64;
  double range_ratio = 0.0;  // random: lengths uniform in [len*(1-r), len*(1+r)]
  int max_input_len = 1024, max_output_len = 512;
  int vocab_size = 256;      // token ids for completions prompts are drawn from [3, vocab_size)
  uint64_t seed = 0;
  GoodputLimits limits;
  std::string json_out;
};

struct Prompt {
  int input_len;
  int output_len;
};

std::vector<Prompt> MakePrompts(const Options& o, std::mt19937_64& rng) {
  std::vector<Prompt> prompts;
  // ShareGPT-shaped: log-normal lengths whose medians and spreads resemble ShareGPT
  // conversations (median ~150 prompt / ~120 completion tokens, long tails).
  std::lognormal_distribution<double> in_ln(std::log(150.0), 1.0), out_ln(std::log(120.0), 0.9);
  for (int i = 0; i < o.num_prompts; ++i) {
    Prompt p{};
    if (o.dataset == "sharegpt-shaped") {
      p.input_len = static_cast<int>(in_ln(rng));
      p.output_len = static_cast<int>(out_ln(rng));
    } else {
      auto pick = [&](int len) {
        int lo = std::max(1, static_cast<int>(len * (1 - o.range_ratio)));
        int hi = std::max(lo, static_cast<int>(len * (1 + o.range_ratio)));
        return std::uniform_int_distribution<int>(lo, hi)(rng);
      };
      p.input_len = pick(o.input_len);
      p.output_len = pick(o.output_len);
    }
    p.input_len = std::clamp(p.input_len, 1, o.max_input_len);
    p.output_len = std::clamp(p.output_len, 1, o.max_output_len);
    prompts.push_back(p);
  }
  return prompts;
}

std::string MakeBody(const Options& o, const Prompt& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  nlohmann::json body = {{"model", o.model}, {"max_tokens", p.output_len}, {"ignore_eos", true},
                         {"stream", true}, {"temperature", 0.0},
                         {"stream_options", {{"include_usage", true}}}};
  if (o.api == "chat") {
    static const char* kWords[] = {"the", "model", "serves", "tokens", "quickly", "while", "decode",
                                   "prefill", "cache", "blocks", "stream", "over", "network"};
    std::string text;
    for (int i = 0; i < p.input_len; ++i) text += std::string(i ? " " : "") + kWords[rng() % 13];
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", text}}});
  } else {
    std::vector<int> ids(p.input_len);
    std::uniform_int_distribution<int> id(3, std::max(4, o.vocab_size - 1));
    for (int& t : ids) t = id(rng);
    body["prompt"] = ids;
  }
  return body.dump();
}

int Run(const Options& o) {
  std::mt19937_64 rng(o.seed);
  std::vector<Prompt> prompts = MakePrompts(o, rng);
  std::vector<RequestRecord> records(prompts.size());
  auto start = std::chrono::steady_clock::now();
  auto send = [&](size_t i) { records[i] = SendStreaming(o.endpoint, MakeBody(o, prompts[i], o.seed + i)); };
  std::vector<std::thread> threads;
  if (o.request_rate > 0) {
    std::exponential_distribution<double> gap(o.request_rate);
    auto at = start;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::this_thread::sleep_until(at);
      threads.emplace_back(send, i);
      at += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(gap(rng)));
    }
  } else {
    std::atomic<size_t> next{0};
    for (int w = 0; w < std::max(1, o.concurrency); ++w) {
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < prompts.size();) send(i);
      });
    }
  }
  for (auto& t : threads) t.join();
  double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Summary s = Summarize(records, duration, o.limits);
  int shown = 0;
  for (const auto& r : records) {
    if (!r.ok && shown++ < 5) std::fprintf(stderr, "request failed: %s\n", r.error.c_str());
  }
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"completed", s.completed}, {"failed", s.failed}, {"duration_s", s.duration_s},
                        {"request_throughput", s.request_throughput},
                        {"output_throughput", s.output_throughput}, {"goodput", s.goodput},
                        {"ttft_ms", s.ttft_ms}, {"tpot_ms", s.tpot_ms}, {"itl_ms", s.itl_ms},
                        {"e2e_ms", s.e2e_ms}};
    std::ofstream(o.json_out) << j.dump(2) << "\n";
  }
  std::printf("%s", FormatSummary(s).c_str());
  return s.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  tandem::bench::Options o;
  CLI::App app("tandem-bench-serving: load generator for OpenAI-compatible endpoints");
  app.add_option("--host", o.endpoint.host, "server host");
  app.add_option("--port", o.endpoint.port, "server port");
  app.add_option("--api", o.api, "completions | chat")->check(CLI::IsMember({"completions", "chat"}));
  app.add_option("--model", o.model, "model name sent in requests");
  app.add_option("--api-key", o.endpoint.api_key, "bearer token");
  app.add_option("--num-prompts", o.num_prompts, "requests to send")->check(CLI::PositiveNumber);
  app.add_option("--request-rate", o.request_rate, "Poisson arrival rate (req/s); 0 = fixed concurrency");
  app.add_option("--concurrency", o.concurrency, "requests in flight when --request-rate is 0");
  app.add_option("--dataset", o.dataset, "random | sharegpt-shaped")
      ->check(CLI::IsMember({"random", "sharegpt-shaped"}));
  app.add_option("--input-len", o.input_len, "random: prompt tokens");
  app.add_option("--output-len", o.output_len, "random: completion tokens");
  app.add_option("--range-ratio", o.range_ratio, "random: +- fraction of the lengths");
  app.add_option("--max-input-len", o.max_input_len, "cap on prompt tokens");
  app.add_option("--max-output-len", o.max_output_len, "cap on completion tokens");
  app.add_option("--vocab-size", o.vocab_size, "token ids are drawn below this");
  app.add_option("--seed", o.seed, "random seed");
  app.add_option("--goodput-ttft-ms", o.limits.ttft_ms, "goodput TTFT limit (ms)");
  app.add_option("--goodput-tpot-ms", o.limits.tpot_ms, "goodput TPOT limit (ms)");
  app.add_option("--timeout-s", o.endpoint.timeout_s, "per-request timeout");
  app.add_option("--json-out", o.json_out, "also write the summary as JSON here");
  CLI11_PARSE(app, argc, argv);
  o.endpoint.path = o.api == "chat" ? "/v1/chat/completions" : "/v1/completions";
  return tandem::bench::Run(o);
}
