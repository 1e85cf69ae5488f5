// tandem-bench-serving: a load generator for any OpenAI-compatible endpoint.
//
// Sends streaming requests at a Poisson rate (--request-rate) or with a fixed
// number in flight (--concurrency), with random or ShareGPT-shaped lengths, and
// prints the workload as it runs, then client-side TTFT, TPOT, ITL and e2e,
// throughput and goodput, and the server-side histograms (TTFT, ITL, queue, KV
// transfer, ...) diffed from the router's and the nodes' /metrics.
//
//   tandem-bench-serving --port 8000 --model tiny --num-prompts 200 --request-rate 20
//       --dataset sharegpt-shaped --goodput-ttft-ms 200 --goodput-tpot-ms 50
//       --metrics-url decode=http://127.0.0.1:9101/metrics --json-line
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

#include "common/base/cpu_time.h"
#include "tools/bench_serving/bench_options.h"
#include "tools/bench_serving/server_report.h"
#include "tools/bench_serving/serving_stats.h"
#include "tools/bench_serving/sse_client.h"

namespace tandem::bench {
namespace {

// Server metrics are recorded as responses finish; the last [DONE] can reach the
// client a moment before its request's histograms are observed.
constexpr auto kMetricsSettle = std::chrono::milliseconds(300);

struct Prompt {
  int input_len;
  int output_len;
};

std::vector<Prompt> MakePrompts(const BenchOptions& o, std::mt19937_64& rng) {
  std::vector<Prompt> prompts;
  // ShareGPT-shaped: log-normal lengths whose medians and spreads resemble ShareGPT
  // conversations (median ~150 prompt / ~120 completion tokens, long tails).
  std::lognormal_distribution<double> in_ln(std::log(150.0), 1.0), out_ln(std::log(120.0), 0.9);
  const LengthRange in = RandomLengthRange(o.input_len, o.range_ratio);
  const LengthRange out = RandomLengthRange(o.output_len, o.range_ratio);
  for (int i = 0; i < o.num_prompts; ++i) {
    Prompt p{};
    if (o.dataset == "sharegpt-shaped") {
      p.input_len = static_cast<int>(in_ln(rng));
      p.output_len = static_cast<int>(out_ln(rng));
    } else {
      p.input_len = std::uniform_int_distribution<int>(in.lo, in.hi)(rng);
      p.output_len = std::uniform_int_distribution<int>(out.lo, out.hi)(rng);
    }
    // Only sharegpt-shaped draws can exceed the caps (validated for random).
    p.input_len = std::clamp(p.input_len, 1, o.max_input_len);
    p.output_len = std::clamp(p.output_len, 1, o.max_output_len);
    prompts.push_back(p);
  }
  return prompts;
}

// Prompt i's contents depend on (seed, i, its length): prompts of different runs
// or lengths share no prefix (no accidental prefix-cache hits across scenarios).
std::string MakeBody(const BenchOptions& o, const Prompt& p, size_t index) {
  std::seed_seq seq{static_cast<uint32_t>(o.seed), static_cast<uint32_t>(o.seed >> 32), static_cast<uint32_t>(index),
                    static_cast<uint32_t>(p.input_len)};
  std::mt19937_64 rng(seq);
  nlohmann::json body = {{"model", o.model},   {"max_tokens", p.output_len},
                         {"ignore_eos", true}, {"stream", true},
                         {"temperature", 0.0}, {"stream_options", {{"include_usage", true}}}};
  if (o.api == "chat") {
    static const char* kWords[] = {"the",     "model", "serves", "tokens", "quickly", "while",  "decode",
                                   "prefill", "cache", "blocks", "stream", "over",    "network"};
    std::string text;
    for (int i = 0; i < p.input_len; ++i) text += std::string(i ? " " : "") + kWords[rng() % 13];
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", text}}});
  } else {
    std::vector<int> ids(p.input_len);
    std::uniform_int_distribution<int> id(3, o.vocab_size - 1);
    for (int& t : ids) t = id(rng);
    body["prompt"] = ids;
  }
  return body.dump();
}

// Reads every page; a page that cannot be read or parsed keeps its error.
std::vector<StatusOr<MetricsSnapshot>> Scrape(const std::vector<MetricsSource>& sources) {
  std::vector<StatusOr<MetricsSnapshot>> pages;
  for (const MetricsSource& source : sources) {
    StatusOr<std::string> text = HttpGet(source.page);
    if (!text.ok()) {
      pages.push_back(text.status());
      continue;
    }
    StatusOr<PromPage> page = ParsePrometheusText(*text);
    if (!page.ok()) {
      pages.push_back(page.status());
      continue;
    }
    // Tandem's families, and every process's CPU time (what the serving path costs its host).
    MetricsSnapshot snapshot = Collect(*page, "tandem_");
    snapshot.counters.merge(Collect(*page, "process_cpu_seconds").counters);
    pages.push_back(std::move(snapshot));
  }
  return pages;
}

std::vector<SourceDelta> Deltas(const std::vector<MetricsSource>& sources,
                                const std::vector<StatusOr<MetricsSnapshot>>& before,
                                const std::vector<StatusOr<MetricsSnapshot>>& after) {
  std::vector<SourceDelta> deltas;
  for (size_t i = 0; i < sources.size(); ++i) {
    SourceDelta d;
    d.name = sources[i].name;
    if (!before[i].ok()) {
      d.error = before[i].status().message();
    } else if (!after[i].ok()) {
      d.error = after[i].status().message();
    } else {
      d.delta = Delta(*before[i], *after[i]);
    }
    deltas.push_back(std::move(d));
  }
  return deltas;
}

nlohmann::json LatencyJson(const LatencyMs& l) {
  return {{"mean", l.mean}, {"p50", l.p50}, {"p90", l.p90}, {"p99", l.p99}};
}

nlohmann::json SummaryJson(const BenchOptions& o, const std::vector<Prompt>& prompts, const Summary& s,
                           const std::vector<SourceDelta>& server, double client_cpu_s) {
  long prompt_tokens = 0;
  for (const Prompt& p : prompts) prompt_tokens += p.input_len;
  nlohmann::json workload = {{"api", o.api},
                             {"dataset", o.dataset},
                             {"num_prompts", o.num_prompts},
                             {"request_rate", o.request_rate},
                             {"concurrency", o.request_rate > 0 ? 0 : o.concurrency},
                             {"input_len", o.input_len},
                             {"output_len", o.output_len},
                             {"range_ratio", o.range_ratio},
                             {"max_input_len", o.max_input_len},
                             {"max_output_len", o.max_output_len},
                             {"mean_prompt_tokens", prompts.empty() ? 0.0 : double(prompt_tokens) / prompts.size()},
                             {"seed", o.seed}};
  return {{"workload", workload},
          {"completed", s.completed},
          {"failed", s.failed},
          {"duration_s", s.duration_s},
          {"client_cpu_s", client_cpu_s},
          {"total_prompt_tokens", s.total_prompt_tokens},
          {"total_completion_tokens", s.total_completion_tokens},
          {"request_throughput", s.request_throughput},
          {"output_throughput", s.output_throughput},
          {"goodput", s.goodput},
          {"within_slo", s.within_slo},
          {"goodput_limits_ms", {{"ttft", o.limits.ttft_ms}, {"tpot", o.limits.tpot_ms}}},
          {"client_ms",
           {{"ttft", LatencyJson(s.ttft_ms)},
            {"tpot", LatencyJson(s.tpot_ms)},
            {"itl", LatencyJson(s.itl_ms)},
            {"e2e", LatencyJson(s.e2e_ms)}}},
          {"server", ServerReportJson(server)}};
}

std::string DescribePrompts(const std::vector<Prompt>& prompts) {
  if (prompts.empty()) return "";
  int lo = prompts[0].input_len, hi = lo, out_lo = prompts[0].output_len, out_hi = out_lo;
  double sum = 0;
  for (const Prompt& p : prompts) {
    lo = std::min(lo, p.input_len);
    hi = std::max(hi, p.input_len);
    out_lo = std::min(out_lo, p.output_len);
    out_hi = std::max(out_hi, p.output_len);
    sum += p.input_len;
  }
  char buf[256];
  std::snprintf(buf, sizeof(buf), "drawn: prompt %d..%d tokens (mean %.1f), completion %d..%d tokens\n", lo, hi,
                sum / prompts.size(), out_lo, out_hi);
  return buf;
}

int Run(const BenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::vector<Prompt> prompts = MakePrompts(o, rng);
  std::printf("tandem-bench-serving\n%s%s\n", DescribeWorkload(o).c_str(), DescribePrompts(prompts).c_str());
  std::fflush(stdout);
  std::vector<StatusOr<MetricsSnapshot>> before = Scrape(o.metrics_sources);
  const double cpu_before = ProcessCpuSeconds();
  std::vector<RequestRecord> records(prompts.size());
  auto start = std::chrono::steady_clock::now();
  auto send = [&](size_t i) {
    const double send_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    records[i] = SendStreaming(o.endpoint, MakeBody(o, prompts[i], i));
    records[i].send_s = send_s;
    records[i].requested_tokens = prompts[i].output_len;
  };
  std::vector<std::thread> threads;
  if (o.request_rate > 0) {
    std::exponential_distribution<double> gap(o.request_rate);
    auto at = start;
    for (size_t i = 0; i < prompts.size(); ++i) {
      std::this_thread::sleep_until(at);
      threads.emplace_back(send, i);
      at += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(gap(rng)));
    }
  } else {
    std::atomic<size_t> next{0};
    for (int w = 0; w < o.concurrency; ++w) {
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < prompts.size();) send(i);
      });
    }
  }
  for (auto& t : threads) t.join();
  double duration = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // This load generator's own CPU over the run: on the cluster's host, part of its load.
  const double client_cpu_s = ProcessCpuSeconds() - cpu_before;
  std::vector<SourceDelta> server;
  if (!o.metrics_sources.empty()) {
    std::this_thread::sleep_for(kMetricsSettle);
    server = Deltas(o.metrics_sources, before, Scrape(o.metrics_sources));
  }
  Summary s = Summarize(records, duration, o.limits);
  int shown = 0;
  for (const auto& r : records) {
    if (!r.ok && shown++ < 5) std::fprintf(stderr, "request failed: %s\n", r.error.c_str());
  }
  nlohmann::json j = SummaryJson(o, prompts, s, server, client_cpu_s);
  if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
  if (!o.requests_out.empty()) {
    std::ofstream out(o.requests_out);
    for (size_t i = 0; i < records.size(); ++i) out << RecordJsonLine(records[i], prompts[i].input_len);
  }
  std::printf("%s", FormatSummary(s).c_str());
  std::printf("| load generator CPU (s) | %.2f |\n", client_cpu_s);
  if (!server.empty()) std::printf("\n%s", FormatServerReport(server).c_str());
  if (o.json_line) std::printf("summary_json=%s\n", j.dump().c_str());
  return s.failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  auto cmd = tandem::bench::ParseBenchFlags(argc, argv);
  if (!cmd.ok()) {
    std::fprintf(stderr, "tandem-bench-serving: %s\n", cmd.status().message().c_str());
    return 2;
  }
  if (cmd->help_requested) {
    std::printf("%s", cmd->help.c_str());
    return 0;
  }
  return tandem::bench::Run(cmd->options);
}
