// Structured output and echo through the real CPU cluster (router + prefill + decode
// processes, KV over the network) with the official `openai` npm client
// (tests/e2e/structured_output_check.mjs), issue 26 items 2 and 4:
//  - response_format json_object / json_schema and guided_json over a dozen schemas (enums,
//    nesting, arrays with bounds, anyOf, a recursive $ref, type lists), three seeds each,
//    chat and completions, streamed and not: every completion that stops parses and validates
//    against its schema with ajv (an independent validator), and most stop within max_tokens;
//  - echo with logprobs: the prompt tokens' logprobs (computed on the prefill node, sent
//    with the first token) equal the in-process reference engine's within 1e-4, with
//    max_tokens 0 (the prompt alone) and with a completion after it.
// And the router's extensions, priority and include_timing, through the same client.
// Skips with a message when node, the openai package or ajv is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/tokenizer/tokenizer.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"
#include "tests/test_deps.h"

namespace tandem::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kApiKey[] = "sk-e2e-structured-0123456789";

fs::path DepsDir() { return TestDepsDir(); }
fs::path OpenAiModules() { return DepsDir() / "npm" / "openai-client" / "node_modules"; }
fs::path AjvDir() { return DepsDir() / "npm" / "ajv" / "node_modules" / "ajv"; }

std::string MissingPrerequisite() {
  if (std::system("command -v node > /dev/null 2>&1") != 0) return "node is not installed";
  if (!fs::exists(OpenAiModules() / "openai" / "package.json")) return "no openai npm package (tests/e2e/setup_test_data.sh)";
  if (!fs::exists(AjvDir() / "package.json")) return "no ajv (tests/common/grammar/setup_test_data.sh)";
  return "";
}

// The schemas: what a client would send, within the supported subset.
std::vector<std::pair<std::string, json>> Schemas() {
  const char* kSchemas = R"({
    "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
               "age": {"type": "integer"}, "admin": {"type": "boolean"}}, "required": ["name", "age", "admin"]},
    "enums": {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}, "size": {"enum": [1, 2, 3]}},
              "required": ["color", "size"]},
    "optional": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 8},
                 "c": {"type": "null"}}, "required": ["a"]},
    "array": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
    "nested": {"type": "object", "properties": {"user": {"type": "object", "properties": {"id": {"type": "integer"},
               "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 2}},
               "required": ["id", "tags"]}}, "required": ["user"]},
    "any_of": {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}]},
    "type_list": {"type": "object", "properties": {"v": {"type": ["integer", "null", "boolean"]}}, "required": ["v"]},
    "number": {"type": "object", "properties": {"price": {"type": "number"}}, "required": ["price"]},
    "const": {"type": "object", "properties": {"kind": {"const": "event"}, "n": {"type": "integer"}}, "required": ["kind", "n"]},
    "recursive": {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                  "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}}, "required": ["v", "next"]}},
                  "$ref": "#/$defs/node"}
  })";
  std::vector<std::pair<std::string, json>> out;
  const json schemas = json::parse(kSchemas);
  for (const auto& [name, schema] : schemas.items()) out.emplace_back(name, schema);
  return out;
}

class StructuredOutputE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::path(::testing::TempDir()) / ("tandem-so-e2e-" + std::to_string(getpid())));
    fs::create_directories(*root_);
    missing_ = new std::string(MissingPrerequisite());
    if (!missing_->empty()) return;
    ASSERT_TRUE(MakeTinyModel((*root_ / "tiny").string()));
    std::ofstream(*root_ / "router.yaml") << "api_keys:\n  - key: " << kApiKey << "\n    tenant: team-a\n";
    LocalClusterOptions options;
    options.router_args = {"--config", (*root_ / "router.yaml").string()};
    cluster_ = new LocalCluster(root_->string(), options);
    cluster_->Start();
    ASSERT_TRUE(cluster_->WaitReady(std::chrono::seconds(30))) << cluster_->Logs();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
    delete missing_;
  }
  void SetUp() override {
    if (!missing_->empty()) GTEST_SKIP() << "SKIPPED structured output e2e: " << *missing_;
  }

  // Runs the client script on `cases`; its last output line is the summary.
  static json RunCheck(const json& cases) {
    const fs::path work = *root_ / "client";
    fs::create_directories(work);
    std::error_code ec;
    fs::remove(work / "node_modules", ec);
    fs::create_directory_symlink(OpenAiModules(), work / "node_modules");
    fs::copy_file(fs::path(SourceDir()) / "tests/e2e/structured_output_check.mjs", work / "check.mjs",
                  fs::copy_options::overwrite_existing);
    std::ofstream(work / "cases.json") << cases.dump();
    const std::string command = "cd '" + work.string() + "' && timeout 240 node check.mjs " +
                                std::to_string(cluster_->http_port()) + " " + kApiKey + " '" + AjvDir().string() +
                                "' cases.json > client.log 2>&1";
    const int rc = std::system(command.c_str());
    std::ifstream in(work / "client.log");
    std::string line, last, all;
    while (std::getline(in, line)) {
      all += line + "\n";
      if (!line.empty()) last = line;
    }
    EXPECT_EQ(rc, 0) << all;
    const json summary = json::parse(last, nullptr, false);
    EXPECT_FALSE(summary.is_discarded()) << all;
    return summary;
  }

  static fs::path* root_;
  static std::string* missing_;
  static LocalCluster* cluster_;
};

fs::path* StructuredOutputE2eTest::root_ = nullptr;
std::string* StructuredOutputE2eTest::missing_ = nullptr;
LocalCluster* StructuredOutputE2eTest::cluster_ = nullptr;

TEST_F(StructuredOutputE2eTest, EveryStoppedCompletionValidatesAgainstItsSchema) {
  json cases = {{"model", "tiny"}, {"schemas", json::array()}, {"echo", json::array()}};
  int i = 0;
  for (const auto& [name, schema] : Schemas()) {
    for (int seed = 1; seed <= 3; ++seed, ++i) {
      const bool chat = i % 2 == 0;
      json request = {{"max_tokens", 200}, {"temperature", 1.0}, {"seed", seed}};
      if (chat) {
        request["messages"] = {{{"role", "user"}, {"content", "Reply in JSON: " + name}}};
      } else {
        request["prompt"] = "Reply in JSON: " + name;
      }
      // OpenAI's response_format on most; vLLM's guided_json (completions) on some.
      if (!chat && seed == 3) {
        request["guided_json"] = schema;
      } else {
        request["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", name}, {"schema", schema}}}};
      }
      cases["schemas"].push_back({{"name", name + "/" + std::to_string(seed)},
                                  {"api", chat ? "chat" : "completion"},
                                  {"stream", i % 3 == 0},
                                  {"request", request},
                                  {"schema", schema}});
    }
  }
  for (int seed = 1; seed <= 3; ++seed) {
    cases["schemas"].push_back({{"name", "json_object/" + std::to_string(seed)},
                                {"api", "chat"},
                                {"stream", seed == 2},
                                {"request",
                                 {{"messages", {{{"role", "user"}, {"content", "Any JSON object."}}}},
                                  {"max_tokens", 200},
                                  {"seed", seed},
                                  {"response_format", {{"type", "json_object"}}}}},
                                {"schema", nullptr}});
  }
  const json summary = RunCheck(cases);
  const int total = static_cast<int>(cases["schemas"].size());
  std::cout << "structured output through the cluster: " << summary.dump() << " of " << total << "\n";
  EXPECT_TRUE(summary["failures"].empty()) << summary.dump(2);
  EXPECT_EQ(summary["stopped"].get<int>() + summary["length"].get<int>(), total) << summary.dump();
  EXPECT_GE(summary["stopped"].get<int>(), total * 3 / 4) << "most documents complete within 200 tokens";
}

// tool_choice required and a named function are forced by structured output: every call
// names a tool and its arguments validate against the tool's parameters (ajv).
TEST_F(StructuredOutputE2eTest, RequiredAndNamedToolChoicesGiveValidCalls) {
  const json weather = json::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
      "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"]})");
  const json add = json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "required": ["a", "b"]})");
  const json tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", weather}}}},
                      {{"type", "function"}, {"function", {{"name", "add"}, {"parameters", add}}}}};
  json cases = {{"model", "tiny"}, {"schemas", json::array()}, {"echo", json::array()}, {"tools", json::array()}};
  for (int seed = 1; seed <= 4; ++seed) {
    json request = {{"messages", {{{"role", "user"}, {"content", "Use a tool."}}}},
                    {"tools", tools},
                    {"max_tokens", 200},
                    {"seed", seed}};
    request["tool_choice"] = "required";
    request["parallel_tool_calls"] = seed % 2 == 0;
    cases["tools"].push_back({{"name", "required/" + std::to_string(seed)},
                              {"request", request},
                              {"parameters", {{"get_weather", weather}, {"add", add}}}});
    request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "add"}}}};
    cases["tools"].push_back(
        {{"name", "named/" + std::to_string(seed)}, {"request", request}, {"parameters", {{"add", add}}}});
  }
  const json summary = RunCheck(cases);
  std::cout << "tool choices through the cluster: " << summary.dump() << "\n";
  EXPECT_TRUE(summary["failures"].empty()) << summary.dump(2);
  EXPECT_GE(summary["stopped"].get<int>(), 6) << "most forced calls complete within 200 tokens";
}

// priority and include_timing (the router's extensions) through the openai client.
TEST_F(StructuredOutputE2eTest, PriorityAndTimingThroughTheClient) {
  const json summary =
      RunCheck({{"model", "tiny"}, {"schemas", json::array()}, {"echo", json::array()}, {"extensions", true}});
  EXPECT_TRUE(summary["failures"].empty()) << summary.dump(2);
}

TEST_F(StructuredOutputE2eTest, EchoedPromptLogprobsEqualTheReference) {
  auto tokenizer = tokenizer::Tokenizer::FromFile(cluster_->model_dir() + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  const std::string prompt = "The prefill node computes every prompt position's logits.";
  const std::vector<TokenId> ids = *(*tokenizer)->Encode(prompt, /*add_special_tokens=*/true);
  auto entry = [&](TokenId id, float logprob) {
    json bytes = json::array();
    for (unsigned char c : (*tokenizer)->TokenBytes(id)) bytes.push_back(static_cast<int>(c));
    return json{{"bytes", bytes}, {"logprob", logprob}};
  };
  json cases = {{"model", "tiny"}, {"schemas", json::array()}, {"echo", json::array()}};
  for (int max_tokens : {0, 4}) {
    runtime::SamplingParams sampling;
    sampling.temperature = 0;
    sampling.ignore_eos = true;
    sampling.max_tokens = std::max(max_tokens, 1);
    sampling.logprobs = 3;
    sampling.prompt_logprobs = 3;
    std::vector<runtime::SampledLogprobs> logprobs, prompt_logprobs;
    std::vector<TokenId> out = ReferenceRun(cluster_->model_dir(), ids, sampling, nullptr, &logprobs, &prompt_logprobs);
    ASSERT_EQ(prompt_logprobs.size(), ids.size() - 1);
    if (max_tokens == 0) {
      out.clear();
      logprobs.clear();
    }
    json expect = {{"text", prompt + *(*tokenizer)->Decode(out, true)},
                   {"completion_tokens", out.size()},
                   {"tokens", json::array()},
                   {"token_logprobs", json::array({nullptr})},
                   {"top", json::array({nullptr})}};
    for (size_t t = 0; t < ids.size() + out.size(); ++t) expect["tokens"].push_back(t);
    std::vector<runtime::SampledLogprobs> all = prompt_logprobs;
    all.insert(all.end(), logprobs.begin(), logprobs.end());
    for (const runtime::SampledLogprobs& lp : all) {
      expect["token_logprobs"].push_back(lp.logprob);
      json top = json::array();
      for (const runtime::TokenLogprob& t : lp.top) top.push_back(entry(t.token, t.logprob));
      expect["top"].push_back(top);
    }
    cases["echo"].push_back({{"name", "echo/max_tokens " + std::to_string(max_tokens)},
                             {"request",
                              {{"prompt", prompt},
                               {"echo", true},
                               {"logprobs", 3},
                               {"max_tokens", max_tokens},
                               {"temperature", 0},
                               {"ignore_eos", true}}},
                             {"expect", expect}});
  }
  const json summary = RunCheck(cases);
  EXPECT_TRUE(summary["failures"].empty()) << summary.dump(2);
}

}  // namespace
}  // namespace tandem::e2e
