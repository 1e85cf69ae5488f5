// Masks against brute force: for states reached by random generation, every token's bit must
// equal "feeding its bytes to a ByteMatcher keeps a valid prefix" (end tokens: "complete").
#include <random>

#include <gtest/gtest.h>

#include "common/grammar/byte_matcher.h"
#include "common/grammar/grammar_matcher.h"
#include "tests/common/grammar/test_schemas.h"
#include "tests/common/grammar/test_util.h"

namespace tandem::grammar {
namespace {

using testing::TestVocab;

// Compares the matcher's mask with the brute-force one over `ids` (all ids when empty).
// Returns the number of mismatches (each reported).
int CompareWithBruteForce(GrammarMatcher& matcher, const ByteMatcher& bytes, const TestVocab& tv,
                          const std::vector<uint32_t>& mask, const std::string& where) {
  int mismatches = 0;
  const bool complete = bytes.IsComplete();
  for (TokenId id = 0; id < tv.vocab->size(); ++id) {
    bool expected;
    if (std::find(tv.end_tokens.begin(), tv.end_tokens.end(), id) != tv.end_tokens.end()) {
      expected = complete;
    } else if (!tv.vocab->is_text(id)) {
      expected = false;
    } else {
      ByteMatcher copy = bytes;
      expected = copy.Accept(tv.vocab->token_bytes(id));
    }
    if (expected != MaskBit(mask, id) && ++mismatches <= 5) {
      ADD_FAILURE() << where << ": token " << id << " '" << tv.vocab->token_bytes(id) << "' expected "
                    << expected;
    }
  }
  return mismatches;
}

// Random walks over every test format; compares every `every`-th step's mask with brute force.
void RunWalks(const TestVocab& tv, int seeds, int max_steps, int every) {
  for (const auto& format : testing::TestFormats()) {
    auto grammar = Grammar::Compile(format.spec);
    ASSERT_TRUE(grammar.ok()) << format.name;
    auto token_grammar = TokenGrammar::Create(*grammar, tv.vocab);
    for (int seed = 0; seed < seeds; ++seed) {
      std::mt19937 rng(seed);
      GrammarMatcher matcher(token_grammar, tv.end_tokens);
      ByteMatcher bytes(*grammar);
      std::vector<uint32_t> mask(MaskWords(tv.vocab->size()));
      std::string text;
      for (int step = 0; step < max_steps && !matcher.IsTerminated(); ++step) {
        matcher.FillNextTokenMask(mask);
        if (step % every == 0) {
          const std::string where = format.name + " seed " + std::to_string(seed) + " after '" + text + "'";
          if (CompareWithBruteForce(matcher, bytes, tv, mask, where) > 0) return;
        }
        const TokenId t = testing::PickToken(mask, *tv.vocab, tv.end_tokens, step, max_steps / 2, rng);
        ASSERT_GE(t, 0) << format.name << ": empty mask after '" << text << "'";
        ASSERT_TRUE(matcher.AcceptToken(t).ok()) << format.name << " token " << t;
        if (!matcher.IsTerminated()) {
          ASSERT_TRUE(bytes.Accept(tv.vocab->token_bytes(t)));
          text += tv.vocab->token_bytes(t);
        }
      }
    }
  }
}

TEST(TokenMaskTest, TinyVocabularyEveryStepMatchesBruteForce) {
  const TestVocab tv = testing::TinyVocab();
  ASSERT_GT(tv.vocab->size(), 256);
  RunWalks(tv, /*seeds=*/3, /*max_steps=*/120, /*every=*/1);
}

TEST(TokenMaskTest, Llama3VocabularySomeStepsMatchBruteForce) {
  const std::string path = testing::Llama3TokenizerPath();
  if (path.empty()) GTEST_SKIP() << "Llama 3 tokenizer.json absent: run tests/common/tokenizer/setup_test_data.sh";
  const TestVocab tv = testing::Llama3Vocab(path);
  RunWalks(tv, /*seeds=*/1, /*max_steps=*/60, /*every=*/7);
}

}  // namespace
}  // namespace tandem::grammar
