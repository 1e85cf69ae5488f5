// The official OpenAI npm client (`openai`, installed by tests/e2e/setup_test_data.sh)
// against the real local cluster (tandem-router + tandem-prefill + tandem-decode,
// KV over UCX tcp), through tests/router/openai_client_check.mjs. This test
// computes the expectations independently (chat template + tokenizer for the
// prompt token counts, the in-process engine for the greedy text, the decode
// prefix-cache rule for cached tokens) and the script checks every chunk
// against them. Skips with a message when node or the package is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"
#include "tests/e2e/local_cluster.h"
#include "tests/e2e/reference_engine.h"

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

// <deps>/npm/openai-client/node_modules, as setup_test_data.sh installs it.
fs::path NodeModulesDir() {
  const char* deps = std::getenv("TANDEM_DEPS_DIR");
  fs::path root = deps && *deps ? fs::path(deps) : fs::path(SourceDir()) / ".deps";
  return root / "npm" / "openai-client" / "node_modules";
}

// Why the client check cannot run here, or "" when it can.
std::string MissingPrerequisite() {
  if (std::system("command -v node > /dev/null 2>&1") != 0) return "node is not installed";
  if (!fs::exists(NodeModulesDir() / "openai" / "package.json")) {
    return "the openai npm package is not in " + NodeModulesDir().string() + " (run tests/e2e/setup_test_data.sh)";
  }
  return "";
}

// Copies the check script into `work` next to a node_modules link (ESM imports
// ignore NODE_PATH), runs it, and returns its exit status; output in *log.
int RunClientCheck(const fs::path& work, const std::vector<std::string>& args, std::string* log) {
  fs::create_directories(work);
  std::error_code ec;
  fs::remove(work / "node_modules", ec);
  fs::create_directory_symlink(NodeModulesDir(), work / "node_modules");
  fs::copy_file(fs::path(SourceDir()) / "tests/router/openai_client_check.mjs", work / "openai_client_check.mjs",
                fs::copy_options::overwrite_existing);
  std::string command = "cd '" + work.string() + "' && timeout 120 node openai_client_check.mjs";
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
    std::ofstream(*root_ / "router.yaml") << "api_keys:\n  - key: " << kApiKey << "\n    tenant: team-a\n";
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

  json spec = {{"model", "tiny"}, {"check_errors", true}, {"cases", cases}};
  std::ofstream(*root_ / "expect.json") << spec.dump(2);
  std::string log;
  int rc = RunClientCheck(*root_ / "client",
                          {std::to_string(cluster_->http_port()), kApiKey, (*root_ / "expect.json").string()}, &log);
  EXPECT_EQ(rc, 0) << "openai client check failed:\n" << log << "\nexpectations:\n" << spec.dump(2);
  EXPECT_NE(log.find("openai client check: OK"), std::string::npos) << log;
  std::cout << log;
}

// The same script over router_fake_server (the HTTP layer over a fake backend).
TEST_F(OpenAiClientE2eTest, FakeBackendServerPassesTheSameChecks) {
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
