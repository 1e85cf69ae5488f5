// Structured output in the engine (CPU backend, the built-in tiny model with its tokenizer):
// every sampled token follows the request's grammar, a request ends only once its document is
// complete, the masks follow a request that moved mid-generation, and a spec the grammar
// refuses is refused at admission. The documents are checked by parsing them here; the
// independent schema validator (ajv) runs in tests/common/grammar and the e2e test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/engine/engine.h"
#include "common/tokenizer/tokenizer.h"
#include "tests/common/engine/engine_test_util.h"
#include "tools/make_model/presets.h"
#include "tools/make_model/tokenizer_files.h"
#include "tools/make_model/weight_writer.h"

namespace tandem::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::RunToCompletion;

class EngineStructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((fs::path(::testing::TempDir()) / ("tandem-so-" + std::to_string(getpid()))).string());
    fs::create_directories(*dir_);
    StatusOr<model::ModelConfig> config = tools::PresetConfig("tiny");
    ASSERT_TRUE(config.ok());
    ASSERT_TRUE(tools::WriteTinyTokenizer(*dir_, &*config).ok());
    std::ofstream(*dir_ + "/config.json") << tools::ModelConfigJson(*config);
    std::ofstream(*dir_ + "/generation_config.json") << tools::GenerationConfigJson(*config);
    tools::WeightWriterOptions options;
    options.num_threads = 1;
    ASSERT_TRUE(tools::WriteRandomWeights(*config, options, *dir_).ok());
    auto tokenizer = tokenizer::Tokenizer::FromFile(*dir_ + "/tokenizer.json");
    ASSERT_TRUE(tokenizer.ok());
    tokenizer_ = tokenizer->release();
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete tokenizer_;
  }

  static EngineConfig Config() {
    EngineConfig c = testing::SmallConfig(*dir_);
    c.model_name = "tiny";
    c.num_device_blocks = 256;
    return c;
  }
  static EngineRequest Structured(RequestId id, const json& spec, uint64_t seed, int max_tokens = 300) {
    EngineRequest r;
    r.id = id;
    r.tenant_salt = "t0";
    r.prompt_tokens = *tokenizer_->Encode("Answer in JSON: a person with a name and an age.", true);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.sampling.max_tokens = max_tokens;
    r.sampling.structured_output = spec.dump();
    return r;
  }
  static std::string Text(const std::vector<TokenId>& tokens) {
    return *tokenizer_->Decode(tokens, /*skip_special_tokens=*/true);
  }

  static std::string* dir_;
  static tokenizer::Tokenizer* tokenizer_;
};

std::string* EngineStructuredOutputTest::dir_ = nullptr;
tokenizer::Tokenizer* EngineStructuredOutputTest::tokenizer_ = nullptr;

const json kPerson = {{"type", "json_schema"},
                      {"schema",
                       {{"type", "object"},
                        {"properties",
                         {{"name", {{"type", "string"}, {"maxLength", 12}}},
                          {"age", {{"type", "integer"}}},
                          {"role", {{"enum", json::array({"admin", "user", "guest"})}}},
                          {"ok", {{"type", "boolean"}}}}},
                        {"required", json::array({"name", "age", "role", "ok"})}}}};

TEST_F(EngineStructuredOutputTest, EveryFinishedOutputIsADocumentOfTheSchema) {
  auto engine = testing::MakeEngine(Config());
  constexpr int kRequests = 12;
  for (int i = 0; i < kRequests; ++i) engine->Submit(Structured(i + 1, kPerson, 1000 + i));
  std::map<RequestId, testing::Result> results = RunToCompletion(*engine, kRequests);
  int stopped = 0;
  for (const auto& [id, r] : results) {
    ASSERT_TRUE(r.final.status.ok()) << r.final.status.ToString();
    if (r.final.finish_reason != scheduler::FinishReason::kStop) continue;
    ++stopped;
    // The last token is the end token; the text before it is the document.
    const json doc = json::parse(Text(r.tokens), nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded()) << "request " << id << ": " << Text(r.tokens);
    ASSERT_TRUE(doc.is_object());
    EXPECT_TRUE(doc.at("name").is_string());
    EXPECT_LE(doc.at("name").get<std::string>().size(), 12u * 4);
    EXPECT_TRUE(doc.at("age").is_number_integer());
    EXPECT_TRUE(doc.at("role") == "admin" || doc.at("role") == "user" || doc.at("role") == "guest");
    EXPECT_TRUE(doc.at("ok").is_boolean());
    EXPECT_EQ(doc.size(), 4u);
  }
  EXPECT_GE(stopped, kRequests * 3 / 4) << "most documents of this small schema complete within 300 tokens";
}

// Without a grammar the same seeds give free text that is not a document.
TEST_F(EngineStructuredOutputTest, FreeTextIsNotADocument) {
  auto engine = testing::MakeEngine(Config());
  EngineRequest free = Structured(1, kPerson, 1000, 40);
  free.sampling.structured_output.clear();
  engine->Submit(free);
  const auto results = RunToCompletion(*engine, 1);
  EXPECT_TRUE(json::parse(Text(results.at(1).tokens), nullptr, false).is_discarded());
}

// A request moved after k tokens (its output so far at the end of the prompt) gets the
// same masks: the seeded continuation equals the uninterrupted run.
TEST_F(EngineStructuredOutputTest, AMovedRequestContinuesTheSameDocument) {
  const EngineRequest request = Structured(1, kPerson, 77, 120);
  std::vector<TokenId> full;
  {
    auto engine = testing::MakeEngine(Config());
    engine->Submit(request);
    full = RunToCompletion(*engine, 1).at(1).tokens;
  }
  ASSERT_GT(full.size(), 8u);
  const std::vector<TokenId> done(full.begin(), full.begin() + 5);
  auto engine = testing::MakeEngine(Config());
  engine->Submit(testing::Moved(request, 2, done));
  std::vector<TokenId> rest = RunToCompletion(*engine, 1).at(2).tokens;
  rest.insert(rest.begin(), done.begin(), done.end());
  EXPECT_EQ(rest, full);
}

TEST_F(EngineStructuredOutputTest, ARefusedSpecIsRefusedAtAdmission) {
  auto engine = testing::MakeEngine(Config());
  engine->Submit(Structured(1, {{"type", "json_schema"}, {"schema", {{"type", "string"}, {"pattern", "a+"}}}}, 1));
  engine->Submit(Structured(2, {{"type", "json_object"}}, 2, 30));
  const auto results = RunToCompletion(*engine, 2);
  EXPECT_EQ(results.at(1).final.status.code(), StatusCode::kInvalidArgument) << results.at(1).final.status.ToString();
  EXPECT_TRUE(results.at(2).final.status.ok());
  EXPECT_EQ(Text(results.at(2).tokens).substr(0, 1), "{");
}

}  // namespace
}  // namespace tandem::engine
