// Random generations over every test format and several seeds must end (complete + an end
// token), parse as JSON, and satisfy their schema by an independent validator: ajv under node
// (tests/common/grammar/setup_test_data.sh installs it; the test skips without node/ajv).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/grammar/grammar_matcher.h"
#include "tests/common/grammar/test_schemas.h"
#include "tests/common/grammar/test_util.h"
#include "tests/test_deps.h"

namespace tandem::grammar {
namespace {

using testing::TestVocab;

std::string SourceDir() {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return src != nullptr ? src : ".";
}

// One generation; "" (with a failure) if it does not end within max_steps.
std::string Generate(const std::shared_ptr<TokenGrammar>& grammar, const TestVocab& tv, int seed,
                     const std::string& name) {
  constexpr int kMaxSteps = 1500;
  constexpr int kSoftCap = 300;
  std::mt19937 rng(seed);
  GrammarMatcher matcher(grammar, tv.end_tokens);
  std::vector<uint32_t> mask(MaskWords(tv.vocab->size()));
  std::string text;
  for (int step = 0; step < kMaxSteps && !matcher.IsTerminated(); ++step) {
    matcher.FillNextTokenMask(mask);
    const TokenId t = testing::PickToken(mask, *tv.vocab, tv.end_tokens, step, kSoftCap, rng);
    if (t < 0) {
      ADD_FAILURE() << name << " seed " << seed << ": empty mask after '" << text << "'";
      return "";
    }
    const bool end = std::find(tv.end_tokens.begin(), tv.end_tokens.end(), t) != tv.end_tokens.end();
    EXPECT_EQ(end, end && matcher.IsComplete());
    if (!matcher.AcceptToken(t).ok()) {
      ADD_FAILURE() << name << ": masked token refused";
      return "";
    }
    if (!end) text += tv.vocab->token_bytes(t);
  }
  if (!matcher.IsTerminated()) {
    ADD_FAILURE() << name << " seed " << seed << ": no end after " << kMaxSteps << " steps: " << text;
    return "";
  }
  return text;
}

nlohmann::json GenerateAll(const TestVocab& tv, const std::string& vocab_name, int seeds) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& format : testing::TestFormats()) {
    auto grammar = Grammar::Compile(format.spec);
    EXPECT_TRUE(grammar.ok()) << format.name;
    if (!grammar.ok()) continue;
    auto token_grammar = TokenGrammar::Create(*grammar, tv.vocab);
    for (int seed = 0; seed < seeds; ++seed) {
      const std::string name = format.name + "/" + vocab_name + "/seed" + std::to_string(seed);
      const std::string doc = Generate(token_grammar, tv, seed, name);
      if (doc.empty()) continue;
      const auto parsed = nlohmann::json::parse(doc, nullptr, false);
      EXPECT_FALSE(parsed.is_discarded()) << name << ": nlohmann cannot parse: " << doc;
      cases.push_back({{"name", name}, {"schema", nlohmann::json::parse(format.schema)}, {"document", doc}});
    }
  }
  return cases;
}

TEST(GrammarGenerationTest, GeneratedDocumentsSatisfyTheirSchemas) {
  const std::string ajv = TestDepsDir() + "/npm/ajv/node_modules/ajv";
  const bool have_ajv = std::system("command -v node >/dev/null 2>&1") == 0 && std::filesystem::exists(ajv);
  nlohmann::json cases = GenerateAll(testing::TinyVocab(), "tiny", 4);
  if (const std::string llama3 = testing::Llama3TokenizerPath(); !llama3.empty()) {
    for (auto& c : GenerateAll(testing::Llama3Vocab(llama3), "llama3", 3)) cases.push_back(c);
  }
  ASSERT_GE(cases.size(), 50u * 4);
  if (!have_ajv) GTEST_SKIP() << "node or ajv absent: run tests/common/grammar/setup_test_data.sh";
  const auto dir = std::filesystem::temp_directory_path() / ("grammar_gen_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cases_path = (dir / "cases.json").string();
  const std::string out_path = (dir / "ajv.out").string();
  std::ofstream(cases_path) << cases.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string cmd = "node '" + SourceDir() + "/tests/common/grammar/validate_with_ajv.cjs' '" + ajv + "' '" +
                          cases_path + "' > '" + out_path + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(out_path).rdbuf();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(rc, 0) << out.str();
  std::cout << out.str().substr(out.str().rfind('\n', out.str().size() - 2) + 1);
}

}  // namespace
}  // namespace tandem::grammar
