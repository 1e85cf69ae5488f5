// The official OpenAI npm client (`openai`, installed by tests/e2e/setup_test_data.sh)
// against the real local cluster (tandem-router + tandem-prefill + tandem-decode,
// KV over UCX tcp), through tests/router/openai_client_check.mjs. This test
// computes the expectations independently (chat template + tokenizer for the
// prompt token counts, the in-process engine for the greedy text, the decode
// prefix-cache rule for cached tokens) and the script checks every chunk
// against them. Also: models.retrieve, a bad tool definition refused (the SDK
// throws BadRequestError), unknown fields named in x-tandem-ignored-fields,
// min_tokens against a stop token id, include_stop_str_in_output, and /tokenize
// + /detokenize against the test's tokenizer (and the JS reference tokenizer
// when tests/common/tokenizer/setup_test_data.sh installed it). Skips with a
// message when node or the package is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"
#include "tests/test_deps.h"

namespace tandem::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kApiKey[] = "sk-e2e-openai-client-0123456789";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path DepsDir() { return TestDepsDir(); }

// <deps>/npm/openai-client/node_modules, as setup_test_data.sh installs it.
fs::path NodeModulesDir() { return DepsDir() / "npm" / "openai-client" / "node_modules"; }

// <deps>/npm/node_modules with @huggingface/tokenizers (tests/common/tokenizer/setup_test_data.sh), or "".
std::string ReferenceTokenizerModules() {
  const fs::path dir = DepsDir() / "npm" / "node_modules";
  return fs::exists(dir / "@huggingface" / "tokenizers" / "package.json") ? dir.string() : "";
}

// Why the client check cannot run here, or "" when it can.
std::string MissingPrerequisite() {
  if (std::system("command -v node > /dev/null 2>&1") != 0) return "node is not installed";
  if (!fs::exists(NodeModulesDir() / "openai" / "package.json")) {
    return "the openai npm package is not in " + NodeModulesDir().string() + " (run tests/e2e/setup_test_data.sh)";
  }
  return "";
}

// Copies a check script of tests/router into `work` next to a node_modules link (ESM
// imports ignore NODE_PATH), runs it, and returns its exit status; output in *log.
int RunClientCheck(const fs::path& work, const std::vector<std::string>& args, std::string* log,
                   const std::string& script = "openai_client_check.mjs") {
  fs::create_directories(work);
  std::error_code ec;
  fs::remove(work / "node_modules", ec);
  fs::create_directory_symlink(NodeModulesDir(), work / "node_modules");
  fs::copy_file(fs::path(SourceDir()) / "tests/router" / script, work / script, fs::copy_options::overwrite_existing);
  std::string command = "cd '" + work.string() + "' && timeout 120 node " + script;
  for (const std::string& a : args) command += " '" + a + "'";
  command += " > client.log 2>&1";
  int rc = std::system(command.c_str());
  *log = ReadFile(work / "client.log");
  return rc;
}

class OpenAiClientE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::path(::testing::TempDir()) / ("tandem-openai-e2e-" + std::to_string(getpid())));
    fs::create_directories(*root_);
    missing_ = new std::string(MissingPrerequisite());
    if (!missing_->empty()) return;
    ASSERT_TRUE(MakeTinyModel((*root_ / "tiny").string()));
    // API keys on, so the script can check 401 for a wrong key.
    // The tiny model's template shows no tool-call format: hermes parses its output.
    std::ofstream(*root_ / "router.yaml") << "api_keys:\n  - key: " << kApiKey
                                          << "\n    tenant: team-a\ntool_call_parser: hermes\n";
    LocalClusterOptions options;
    options.router_args = {"--config", (*root_ / "router.yaml").string()};
    cluster_ = new LocalCluster(root_->string(), options);
    cluster_->Start();
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
    auto tok = tokenizer::Tokenizer::FromFile(cluster_->model_dir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok());
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete tokenizer_;
    tokenizer_ = nullptr;
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
    delete missing_;
  }
  void SetUp() override {
    if (!missing_->empty()) GTEST_SKIP() << "SKIPPED openai client e2e: " << *missing_;
  }

  static std::string Text(const std::vector<TokenId>& ids) {
    return *tokenizer_->Decode(ids, /*skip_special_tokens=*/true);
  }

  // Two cases of one request: first plain (nothing cached yet), then streamed
  // with usage (the same prompt again: decode's prefix cache hits).
  static void AddPlainThenStreamed(const std::string& api, const std::string& name, json request,
                                   const std::vector<TokenId>& prompt_ids, int max_tokens, json* cases) {
    const std::string text = Text(ReferenceTokens(cluster_->model_dir(), prompt_ids, max_tokens));
    const int prompt_tokens = static_cast<int>(prompt_ids.size());
    json expect = {{"text", text},
                   {"prompt_tokens", prompt_tokens},
                   {"completion_tokens", max_tokens},
                   {"cached_tokens", 0},
                   {"finish_reason", "length"}};
    cases->push_back({{"name", name + " plain"}, {"api", api}, {"request", request}, {"expect", expect}});
    request["stream"] = true;
    request["stream_options"] = {{"include_usage", true}};
    expect["cached_tokens"] = RepeatedPromptCachedTokens(prompt_tokens);
    cases->push_back({{"name", name + " streamed"},
                      {"api", api},
                      {"request", request},
                      {"expect", expect},
                      {"same_text_as", name + " plain"}});
  }

  // A streamed completion that ends at a stop string: the first ASCII word token
  // (after the second) of the greedy output. Expected text = the greedy text
  // before the stop string's first occurrence; completion_tokens = the tokens
  // generated until the decoded text first contains it.
  static void StopStringCase(json* out) {
    const std::string prompt =
        "A prompt of its own, so nothing of it is cached on decode yet; it is long enough to fill a "
        "block of sixteen tokens, so that sending it again finds that block cached.";
    auto prompt_ids = tokenizer_->Encode(prompt, /*add_special_tokens=*/true);
    ASSERT_TRUE(prompt_ids.ok());
    const std::vector<TokenId> tokens = ReferenceTokens(cluster_->model_dir(), *prompt_ids, 24);
    const std::string full = Text(tokens);
    std::string stop;
    for (size_t j = 2; j < tokens.size() && stop.empty(); ++j) {
      std::string piece = Text({tokens[j]});
      bool word = piece.size() >= 2;
      for (char c : piece) word = word && c > ' ' - 1 && c < 127;
      if (word && piece.find_first_not_of(' ') != std::string::npos) stop = piece;
    }
    ASSERT_FALSE(stop.empty()) << "no ASCII word token in the greedy output: " << full;
    const std::string expected = full.substr(0, full.find(stop));
    int completion_tokens = 0;
    while (Text(std::vector<TokenId>(tokens.begin(), tokens.begin() + completion_tokens)).find(stop) ==
           std::string::npos) {
      ++completion_tokens;
    }
    *out = {{"name", "completion stopped"},
            {"api", "completion"},
            {"request",
             {{"model", "tiny"},
              {"prompt", prompt},
              {"max_tokens", 24},
              {"temperature", 0},
              {"ignore_eos", true},
              {"stop", json::array({stop})},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}}},
            {"expect",
             {{"text", expected},
              {"prompt_tokens", static_cast<int>(prompt_ids->size())},
              {"completion_tokens", completion_tokens},
              {"cached_tokens", 0},
              {"finish_reason", "stop"}}}};
  }

  // min_tokens against a stop token id: the stop id is the first greedy token that
  // did not occur before it; generation stops there, unless min_tokens is past it.
  // Both expectations come from the reference engine with the same parameters; as
  // in vLLM the stop token's text is not output unless include_stop_str_in_output.
  static void MinTokensCases(json* cases) {
    const std::string prompt = "Where to stop: a prompt of its own for the min_tokens cases, long enough for a block.";
    auto prompt_ids = tokenizer_->Encode(prompt, /*add_special_tokens=*/true);
    ASSERT_TRUE(prompt_ids.ok());
    const std::vector<TokenId> greedy = ReferenceTokens(cluster_->model_dir(), *prompt_ids, 24);
    size_t at = 1;
    while (at < greedy.size() && std::count(greedy.begin(), greedy.begin() + at, greedy[at]) > 0) ++at;
    ASSERT_LT(at, 10u) << "no early fresh token in the greedy output";
    const TokenId stop_id = greedy[at];
    const int prompt_tokens = static_cast<int>(prompt_ids->size());
    struct Variant {
      const char* name;
      int min_tokens;
      bool include;
      bool stream;
    };
    const int min_tokens = static_cast<int>(at) + 6;
    int completion_without = 0;
    for (const Variant& v :
         {Variant{"stop token id", 0, false, false}, Variant{"stop token id, min_tokens", min_tokens, false, true},
          Variant{"stop token id, included", 0, true, false}}) {
      runtime::SamplingParams sampling;
      sampling.temperature = 0;
      sampling.max_tokens = 24;
      sampling.stop_token_ids = {stop_id};
      sampling.min_tokens = v.min_tokens;
      std::string finish;
      const std::vector<TokenId> tokens = ReferenceRun(cluster_->model_dir(), *prompt_ids, sampling, &finish);
      const bool drop_last = finish == "stop" && !v.include;
      const std::string text = Text(std::vector<TokenId>(tokens.begin(), tokens.end() - (drop_last ? 1 : 0)));
      const int completion_tokens = static_cast<int>(tokens.size());
      if (v.min_tokens == 0 && !v.include) completion_without = completion_tokens;
      if (v.min_tokens > 0) {
        EXPECT_GE(completion_tokens, v.min_tokens) << "the reference ignored min_tokens";
        EXPECT_LT(completion_without, v.min_tokens) << "min_tokens would change nothing here";
      }
      json request = {{"model", "tiny"},
                      {"prompt", prompt},
                      {"max_tokens", 24},
                      {"temperature", 0},
                      {"ignore_eos", false},
                      {"stop_token_ids", {stop_id}},
                      {"min_tokens", v.min_tokens},
                      {"include_stop_str_in_output", v.include}};
      if (v.stream) {
        request["stream"] = true;
        request["stream_options"] = {{"include_usage", true}};
      }
      // The first run leaves the prompt's blocks cached on decode.
      const int cached = cases->empty() || (*cases)[cases->size() - 1]["request"]["prompt"] != prompt
                             ? 0
                             : RepeatedPromptCachedTokens(prompt_tokens);
      cases->push_back({{"name", std::string("completion, ") + v.name},
                        {"api", "completion"},
                        {"request", request},
                        {"expect",
                         {{"text", text},
                          {"prompt_tokens", prompt_tokens},
                          {"completion_tokens", completion_tokens},
                          {"cached_tokens", cached},
                          {"finish_reason", finish}}}});
    }
  }

  // The logprobs of one token as the script compares them: its bytes and logprob, and the top entries'.
  static json LogprobJson(TokenId id, float logprob) {
    json bytes = json::array();
    for (unsigned char c : tokenizer_->TokenBytes(id)) bytes.push_back(static_cast<int>(c));
    return {{"bytes", bytes}, {"logprob", std::max(-9999.0, static_cast<double>(logprob))}};
  }

  // A request with logprobs (k top entries) whose tokens and logprobs come from the
  // in-process engine: the reference path, run with the same sampling. The cluster
  // computes the first token's on the prefill node and the rest on decode.
  static void AddLogprobsCase(const std::string& api, const std::string& name, json request,
                              const std::vector<TokenId>& prompt_ids, runtime::SamplingParams sampling, int k,
                              json* cases) {
    sampling.logprobs = k;
    std::vector<runtime::SampledLogprobs> logprobs;
    const std::vector<TokenId> tokens = ReferenceRun(cluster_->model_dir(), prompt_ids, sampling, nullptr, &logprobs);
    ASSERT_EQ(logprobs.size(), tokens.size());
    json expected = json::array();
    for (size_t i = 0; i < tokens.size(); ++i) {
      json entry = LogprobJson(tokens[i], logprobs[i].logprob);
      entry["top"] = json::array();
      for (const runtime::TokenLogprob& t : logprobs[i].top) entry["top"].push_back(LogprobJson(t.token, t.logprob));
      expected.push_back(entry);
    }
    json expect = {{"text", Text(tokens)},
                   {"prompt_tokens", prompt_ids.size()},
                   {"completion_tokens", tokens.size()},
                   {"cached_tokens", 0},
                   {"finish_reason", "length"},
                   {"logprobs", expected}};
    if (api == "chat") {
      request["logprobs"] = true;
      request["top_logprobs"] = k;
    } else {
      request["logprobs"] = k;
    }
    cases->push_back({{"name", name}, {"api", api}, {"request", request}, {"expect", expect}});
  }

  static fs::path* root_;
  static std::string* missing_;
  static LocalCluster* cluster_;
  static tokenizer::Tokenizer* tokenizer_;
};

fs::path* OpenAiClientE2eTest::root_ = nullptr;
std::string* OpenAiClientE2eTest::missing_ = nullptr;
LocalCluster* OpenAiClientE2eTest::cluster_ = nullptr;
tokenizer::Tokenizer* OpenAiClientE2eTest::tokenizer_ = nullptr;

TEST_F(OpenAiClientE2eTest, StreamsChatAndCompletionsThroughTheRealClusterWithExactUsage) {
  json cases = json::array();

  // Chat: the prompt is the rendered template, tokenized without special tokens.
  json messages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                               {{"role", "user"}, {"content", "Write one short line about the sea."}}});
  auto tmpl = tokenizer::ChatTemplate::FromModelDir(cluster_->model_dir());
  auto cfg = tokenizer::TokenizerConfig::FromModelDir(cluster_->model_dir());
  ASSERT_TRUE(tmpl.ok() && cfg.ok());
  tokenizer::ChatRenderOptions render;
  render.bos_token = cfg->bos_token;
  render.eos_token = cfg->eos_token;
  auto rendered = tmpl->Render(messages, render);
  ASSERT_TRUE(rendered.ok());
  auto chat_ids = tokenizer_->Encode(*rendered, /*add_special_tokens=*/false);
  ASSERT_TRUE(chat_ids.ok());
  json chat = {{"model", "tiny"}, {"messages", messages}, {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
  AddPlainThenStreamed("chat", "chat", chat, *chat_ids, 10, &cases);

  // Completion: a string prompt is tokenized with special tokens (BOS).
  const std::string prompt = "Disaggregated serving moves the KV cache from prefill nodes to decode nodes.";
  auto prompt_ids = tokenizer_->Encode(prompt, /*add_special_tokens=*/true);
  ASSERT_TRUE(prompt_ids.ok());
  json completion = {
      {"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  AddPlainThenStreamed("completion", "completion", completion, *prompt_ids, 12, &cases);
  // Token ids, two full blocks: the repeat finds the whole prompt cached, so the
  // router takes the local path and decode recomputes the last block.
  std::vector<TokenId> ids(32);
  for (int i = 0; i < 32; ++i) ids[i] = 50 + (i * 5) % 150;
  json by_ids = {{"model", "tiny"}, {"prompt", ids}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
  AddPlainThenStreamed("completion", "token ids", by_ids, ids, 6, &cases);
  for (int i : {1, 3, 5}) ASSERT_GT(cases[i]["expect"]["cached_tokens"].get<int>(), 0) << "prompts span full blocks";

  // finish_reason "stop": a stop string taken from the greedy text of a fresh prompt.
  json stop_case;
  ASSERT_NO_FATAL_FAILURE(StopStringCase(&stop_case));
  cases.push_back(stop_case);
  // The same again: the router ends it on the stop string before decode's final entry,
  // so cached_tokens must come from decode's first Tokens entry.
  const int stop_prompt_tokens = stop_case["expect"]["prompt_tokens"].get<int>();
  stop_case["name"] = "completion stopped, repeated";
  stop_case["expect"]["cached_tokens"] = RepeatedPromptCachedTokens(stop_prompt_tokens);
  ASSERT_GT(stop_case["expect"]["cached_tokens"].get<int>(), 0) << "the stop prompt spans a full block";
  cases.push_back(stop_case);
  // include_stop_str_in_output: the same text through the end of the stop string, plain and streamed.
  json included = stop_case;
  const std::string stop = stop_case["request"]["stop"][0];
  const std::string before = stop_case["expect"]["text"];
  included["request"]["include_stop_str_in_output"] = true;
  included["expect"]["text"] = before + stop;
  included["name"] = "completion stopped, stop string included, streamed";
  cases.push_back(included);
  included["request"].erase("stream");
  included["request"].erase("stream_options");
  included["name"] = "completion stopped, stop string included";
  cases.push_back(included);
  ASSERT_NO_FATAL_FAILURE(MinTokensCases(&cases));

  // Logprobs (issue 26): greedy chat with the top 5, a sampled completion (the
  // temperature scales them) with the top 3 streamed, each on a prompt of its own.
  {
    json logprob_messages = json::array({{{"role", "user"}, {"content", "Logprobs, please: count to five."}}});
    auto logprob_rendered = tmpl->Render(logprob_messages, render);
    ASSERT_TRUE(logprob_rendered.ok());
    auto logprob_chat_ids = tokenizer_->Encode(*logprob_rendered, /*add_special_tokens=*/false);
    ASSERT_TRUE(logprob_chat_ids.ok());
    runtime::SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 8;
    greedy.ignore_eos = true;
    json chat_lp = {{"model", "tiny"}, {"messages", logprob_messages}, {"max_tokens", 8},
                    {"temperature", 0},  {"ignore_eos", true}};
    ASSERT_NO_FATAL_FAILURE(AddLogprobsCase("chat", "chat logprobs", chat_lp, *logprob_chat_ids, greedy, 5, &cases));
    const std::string sampled_prompt = "Sampled with logprobs: the temperature divides the logits first.";
    auto sampled_ids = tokenizer_->Encode(sampled_prompt, /*add_special_tokens=*/true);
    ASSERT_TRUE(sampled_ids.ok());
    runtime::SamplingParams sampled;
    sampled.temperature = 0.8f;
    sampled.seed = 1234;
    sampled.max_tokens = 8;
    sampled.ignore_eos = true;
    json completion_lp = {{"model", "tiny"},  {"prompt", sampled_prompt}, {"max_tokens", 8}, {"temperature", 0.8},
                          {"seed", 1234},     {"ignore_eos", true},       {"stream", true},
                          {"stream_options", {{"include_usage", true}}}};
    ASSERT_NO_FATAL_FAILURE(
        AddLogprobsCase("completion", "completion logprobs, sampled, streamed", completion_lp, *sampled_ids, sampled,
                        3, &cases));
  }
  // logit_bias -100 on the token greedy decoding picks first: it never appears, and the
  // text is the reference's under the same bias.
  {
    const std::string bias_prompt = "A prompt for logit_bias: the first greedy token is banned.";
    auto bias_ids = tokenizer_->Encode(bias_prompt, /*add_special_tokens=*/true);
    ASSERT_TRUE(bias_ids.ok());
    const std::vector<TokenId> unbiased = ReferenceTokens(cluster_->model_dir(), *bias_ids, 10);
    runtime::SamplingParams biased;
    biased.temperature = 0;
    biased.max_tokens = 10;
    biased.ignore_eos = true;
    biased.logit_bias = {{unbiased[0], -100.0f}};
    const std::vector<TokenId> tokens = ReferenceRun(cluster_->model_dir(), *bias_ids, biased);
    ASSERT_EQ(std::count(tokens.begin(), tokens.end(), unbiased[0]), 0) << "the reference sampled a banned token";
    json request = {{"model", "tiny"},
                    {"prompt", bias_prompt},
                    {"max_tokens", 10},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"logit_bias", {{std::to_string(unbiased[0]), -100}}}};
    cases.push_back({{"name", "completion logit_bias"},
                     {"api", "completion"},
                     {"request", request},
                     {"expect",
                      {{"text", Text(tokens)},
                       {"prompt_tokens", bias_ids->size()},
                       {"completion_tokens", tokens.size()},
                       {"cached_tokens", 0},
                       {"finish_reason", "length"}}}});
  }

  // /tokenize and /detokenize: the completion prompt (ids from the test's tokenizer; the
  // count must equal the completion's usage) and the chat messages.
  auto plain_ids = tokenizer_->Encode(prompt, /*add_special_tokens=*/false);
  ASSERT_TRUE(plain_ids.ok());
  json tokenize = {{"prompt", prompt},
                   {"tokens", *prompt_ids},
                   {"plain_tokens", *plain_ids},
                   {"messages", messages},
                   {"chat_count", chat_ids->size()},
                   {"usage_of", "completion plain"},
                   {"chat_usage_of", "chat plain"}};
  if (const std::string modules = ReferenceTokenizerModules(); !modules.empty()) {
    tokenize["reference"] = {{"node_modules", modules}, {"tokenizer_dir", cluster_->model_dir()}};
  } else {
    std::cout << "note: no @huggingface/tokenizers (tests/common/tokenizer/setup_test_data.sh): /tokenize is "
                 "compared with the test's own tokenizer only\n";
  }
  json spec = {{"model", "tiny"}, {"check_errors", true}, {"cases", cases}, {"tokenize", tokenize}};
  std::ofstream(*root_ / "expect.json") << spec.dump(2);
  std::string log;
  int rc = RunClientCheck(*root_ / "client",
                          {std::to_string(cluster_->http_port()), kApiKey, (*root_ / "expect.json").string()}, &log);
  EXPECT_EQ(rc, 0) << "openai client check failed:\n" << log << "\nexpectations:\n" << spec.dump(2);
  EXPECT_NE(log.find("openai client check: OK"), std::string::npos) << log;
  std::cout << log;
}

// Tools with tool_choice auto through the SDK against the real cluster: the tiny model's
// random text gives no calls or well-formed ones, with a consistent finish_reason.
// (required / named, forced by structured output: structured_output_e2e_test.)
TEST_F(OpenAiClientE2eTest, ToolsThroughTheRealClusterHaveConsistentShapes) {
  std::string log;
  int rc = RunClientCheck(*root_ / "tools-client", {std::to_string(cluster_->http_port()), kApiKey, "cluster"}, &log,
                          "openai_tools_check.mjs");
  EXPECT_EQ(rc, 0) << "openai tools check failed:\n" << log;
  EXPECT_NE(log.find("openai tools check (cluster): OK"), std::string::npos) << log;
}

// Tool calls in each format from router_fake_server's scripted engine, whole and
// through the SDK's stream accumulation.
TEST_F(OpenAiClientE2eTest, FakeEngineToolCallsInEachFormatReachTheSdk) {
  for (const std::string format : {"hermes", "llama3_json"}) {
    ProcessGroup procs(root_->string());
    procs.Start("fake-" + format, {BinaryDir() + "/tests/router/router_fake_server", "--api-key", kApiKey,
                                   "--tool-call-parser", format});
    std::smatch port;
    const std::regex port_line(R"(PORT (\d+))");
    for (int i = 0; i < 100; ++i) {
      const std::string out = procs.FullLog("fake-" + format);
      if (std::regex_search(out, port, port_line)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::string out = procs.FullLog("fake-" + format);
    ASSERT_TRUE(std::regex_search(out, port, port_line)) << "router_fake_server did not start: " << out;
    std::string log;
    int rc = RunClientCheck(*root_ / ("tools-" + format), {port[1].str(), kApiKey, format}, &log,
                            "openai_tools_check.mjs");
    EXPECT_EQ(rc, 0) << format << ":\n" << log;
    EXPECT_NE(log.find("openai tools check (" + format + "): OK"), std::string::npos) << log;
  }
}

// The same script over router_fake_server (the HTTP layer over a fake backend).
TEST_F(OpenAiClientE2eTest, FakeEngineClientServerPassesTheSameChecks) {
  ProcessGroup procs(root_->string());
  procs.Start("fake", {BinaryDir() + "/tests/router/router_fake_server", "--api-key", kApiKey});
  std::smatch port;
  const std::regex port_line(R"(PORT (\d+))");
  for (int i = 0; i < 100; ++i) {
    const std::string out = procs.FullLog("fake");
    if (std::regex_search(out, port, port_line)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string out = procs.FullLog("fake");
  ASSERT_TRUE(std::regex_search(out, port, port_line)) << "router_fake_server did not start: " << out;
  std::string log;
  int rc = RunClientCheck(*root_ / "fake-client", {port[1].str(), kApiKey}, &log);
  EXPECT_EQ(rc, 0) << "openai client check (fake backend) failed:\n" << log;
  EXPECT_NE(log.find("openai client check: OK"), std::string::npos) << log;
}

}  // namespace
}  // namespace tandem::e2e
