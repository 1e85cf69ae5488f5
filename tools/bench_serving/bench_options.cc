#include "tools/bench_serving/bench_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>

namespace tandem::bench {
namespace {

constexpr int kShareGptMaxInputLen = 1024;
constexpr int kShareGptMaxOutputLen = 512;
constexpr double kMetricsTimeoutS = 10;

// "NAME=URL" or "URL" (named after its host:port).
StatusOr<MetricsSource> ParseMetricsSource(const std::string& arg) {
  MetricsSource source;
  std::string url = arg;
  if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("http://", 0) != 0) {
    source.name = arg.substr(0, eq);
    url = arg.substr(eq + 1);
  }
  TANDEM_ASSIGN_OR_RETURN(source.page, ParseHttpUrl(url));
  source.page.timeout_s = kMetricsTimeoutS;
  if (source.name.empty()) source.name = source.page.host + ":" + source.page.port;
  return source;
}

std::string Flag(const char* name, double value) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s %g", name, value);
  return buf;
}

// The checks that need to know which flags were given.
Status Validate(const CLI::App& app, BenchOptions& o) {
  auto given = [&](const char* flag) { return app.count(flag) > 0; };
  if (o.dataset == "sharegpt-shaped") {
    for (const char* flag : {"--input-len", "--output-len", "--range-ratio"}) {
      if (given(flag)) {
        return InvalidArgumentError(std::string(flag) +
                                    " applies to --dataset random only; sharegpt-shaped "
                                    "draws its own lengths (cap them with --max-input-len / --max-output-len)");
      }
    }
    if (!given("--max-input-len")) o.max_input_len = kShareGptMaxInputLen;
    if (!given("--max-output-len")) o.max_output_len = kShareGptMaxOutputLen;
  } else {
    if (o.input_len < 1 || o.output_len < 1) return InvalidArgumentError("--input-len and --output-len must be >= 1");
    if (o.range_ratio < 0 || o.range_ratio >= 1) return InvalidArgumentError("--range-ratio must be in [0, 1)");
    const LengthRange in = RandomLengthRange(o.input_len, o.range_ratio);
    const LengthRange out = RandomLengthRange(o.output_len, o.range_ratio);
    if (given("--max-input-len") && o.max_input_len < in.hi) {
      return InvalidArgumentError("--input-len " + std::to_string(o.input_len) + " asks for prompts up to " +
                                  std::to_string(in.hi) + " tokens but --max-input-len is " +
                                  std::to_string(o.max_input_len) +
                                  "; prompts are never cut: raise --max-input-len or lower --input-len");
    }
    if (given("--max-output-len") && o.max_output_len < out.hi) {
      return InvalidArgumentError("--output-len " + std::to_string(o.output_len) + " asks for completions up to " +
                                  std::to_string(out.hi) + " tokens but --max-output-len is " +
                                  std::to_string(o.max_output_len) +
                                  "; completions are never cut: raise --max-output-len or lower --output-len");
    }
    o.max_input_len = std::max(o.max_input_len, in.hi);
    o.max_output_len = std::max(o.max_output_len, out.hi);
  }
  if (o.max_input_len < 1 || o.max_output_len < 1) {
    return InvalidArgumentError("--max-input-len and --max-output-len must be >= 1");
  }
  if (o.request_rate < 0) return InvalidArgumentError("--request-rate must be >= 0");
  if (o.request_rate > 0 && given("--concurrency")) {
    return InvalidArgumentError(Flag("--concurrency", o.concurrency) + " applies when --request-rate is 0; with " +
                                Flag("--request-rate", o.request_rate) + " requests arrive by a Poisson process");
  }
  if (o.concurrency < 1) return InvalidArgumentError("--concurrency must be >= 1");
  if (o.api == "chat" && given("--vocab-size")) {
    return InvalidArgumentError("--vocab-size applies to --api completions (token-id prompts); chat prompts are words");
  }
  if (o.vocab_size < 4) return InvalidArgumentError("--vocab-size must be >= 4 (ids are drawn from [3, vocab))");
  if (o.limits.ttft_ms < 0 || o.limits.tpot_ms < 0) return InvalidArgumentError("goodput limits must be >= 0");
  return Status::Ok();
}

}  // namespace

LengthRange RandomLengthRange(int len, double ratio) {
  LengthRange r;
  r.lo = std::max(1, static_cast<int>(len * (1 - ratio)));
  r.hi = std::max(r.lo, static_cast<int>(len * (1 + ratio)));
  return r;
}

StatusOr<BenchCommandLine> ParseBenchFlags(int argc, const char* const* argv) {
  BenchCommandLine result;
  BenchOptions& o = result.options;
  std::vector<std::string> metrics_urls;
  bool no_router_metrics = false;
  CLI::App app("tandem-bench-serving: load generator for OpenAI-compatible endpoints");
  app.add_option("--host", o.endpoint.host, "server host")->capture_default_str();
  app.add_option("--port", o.endpoint.port, "server port")->capture_default_str();
  app.add_option("--api", o.api, "completions | chat")->check(CLI::IsMember({"completions", "chat"}));
  app.add_option("--model", o.model, "model name sent in requests")->capture_default_str();
  app.add_option("--api-key", o.endpoint.api_key, "bearer token");
  app.add_option("--num-prompts", o.num_prompts, "requests to send")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--request-rate", o.request_rate,
                 "Poisson arrival rate (req/s); 0 = fixed concurrency (--concurrency)");
  app.add_option("--concurrency", o.concurrency, "requests in flight; only when --request-rate is 0")
      ->capture_default_str();
  app.add_option("--dataset", o.dataset, "random | sharegpt-shaped")
      ->check(CLI::IsMember({"random", "sharegpt-shaped"}));
  app.add_option("--input-len", o.input_len, "random: prompt tokens")->capture_default_str();
  app.add_option("--output-len", o.output_len, "random: completion tokens")->capture_default_str();
  app.add_option("--range-ratio", o.range_ratio, "random: lengths uniform in len*(1-r) .. len*(1+r), r in [0, 1)");
  app.add_option("--max-input-len", o.max_input_len,
                 "sharegpt-shaped: cap on drawn prompt tokens (default 1024); random: follows --input-len "
                 "(a smaller value is an error, prompts are never cut)");
  app.add_option("--max-output-len", o.max_output_len,
                 "sharegpt-shaped: cap on drawn completion tokens (default 512); random: follows --output-len "
                 "(a smaller value is an error)");
  app.add_option("--vocab-size", o.vocab_size, "completions: prompt token ids are drawn from [3, N)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed");
  app.add_option("--goodput-ttft-ms", o.limits.ttft_ms, "goodput SLO: TTFT limit, ms (0 = none)")
      ->capture_default_str();
  app.add_option("--goodput-tpot-ms", o.limits.tpot_ms, "goodput SLO: TPOT limit, ms (0 = none)")
      ->capture_default_str();
  app.add_option("--timeout-s", o.endpoint.timeout_s, "per-request timeout")->capture_default_str();
  app.add_option("--metrics-url", metrics_urls,
                 "[NAME=]http://host:port/metrics of a node (repeatable): server-side histograms are diffed "
                 "over the run");
  app.add_flag("--no-router-metrics", no_router_metrics,
               "do not read the endpoint's own /metrics (it is read by default, as \"router\")");
  app.add_option("--json-out", o.json_out, "also write the summary as JSON to this file");
  app.add_option("--requests-out", o.requests_out,
                 "write one JSON line per request (send_s, prompt_tokens, output_tokens, ok, ttft_s, e2e_s, "
                 "completion_tokens) to this file");
  app.add_flag("--json-line", o.json_line, "print the summary as one JSON line, summary_json={...}, last on stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    result.help_requested = true;
    result.help = app.help();
    return result;
  } catch (const CLI::Error& e) {
    return InvalidArgumentError(std::string("command line: ") + e.what());
  }
  TANDEM_RETURN_IF_ERROR(Validate(app, o));
  o.endpoint.path = o.api == "chat" ? "/v1/chat/completions" : "/v1/completions";
  if (!no_router_metrics) {
    MetricsSource router{"router", o.endpoint};
    router.page.path = "/metrics";
    router.page.timeout_s = kMetricsTimeoutS;
    o.metrics_sources.push_back(router);
  }
  for (const std::string& url : metrics_urls) {
    TANDEM_ASSIGN_OR_RETURN(MetricsSource source, ParseMetricsSource(url));
    o.metrics_sources.push_back(std::move(source));
  }
  return result;
}

std::string DescribeWorkload(const BenchOptions& o) {
  char buf[1024];
  std::string out;
  std::snprintf(buf, sizeof(buf), "endpoint: http://%s:%s%s, model %s\n", o.endpoint.host.c_str(),
                o.endpoint.port.c_str(), o.endpoint.path.c_str(), o.model.c_str());
  out += buf;
  if (o.request_rate > 0) {
    std::snprintf(buf, sizeof(buf), "arrivals: %d requests, Poisson %.2f req/s\n", o.num_prompts, o.request_rate);
  } else {
    std::snprintf(buf, sizeof(buf), "arrivals: %d requests, %d in flight\n", o.num_prompts, o.concurrency);
  }
  out += buf;
  if (o.dataset == "random") {
    const LengthRange in = RandomLengthRange(o.input_len, o.range_ratio);
    const LengthRange out_len = RandomLengthRange(o.output_len, o.range_ratio);
    std::snprintf(buf, sizeof(buf), "lengths: random, prompt %d..%d tokens, completion %d..%d tokens (ignore_eos)\n",
                  in.lo, in.hi, out_len.lo, out_len.hi);
  } else {
    std::snprintf(buf, sizeof(buf),
                  "lengths: sharegpt-shaped, prompt capped at %d tokens, completion capped at %d (ignore_eos)\n",
                  o.max_input_len, o.max_output_len);
  }
  out += buf;
  std::snprintf(buf, sizeof(buf), "prompts: %s, temperature 0, seed %llu\n",
                o.api == "chat" ? "chat words" : ("token ids in [3, " + std::to_string(o.vocab_size) + ")").c_str(),
                static_cast<unsigned long long>(o.seed));
  out += buf;
  std::snprintf(buf, sizeof(buf), "goodput SLO: TTFT <= %g ms, TPOT <= %g ms (0 = no limit)\n", o.limits.ttft_ms,
                o.limits.tpot_ms);
  out += buf;
  for (const MetricsSource& s : o.metrics_sources) {
    out += "metrics: " + s.name + " = http://" + s.page.host + ":" + s.page.port + s.page.path + "\n";
  }
  return out;
}

}  // namespace tandem::bench
