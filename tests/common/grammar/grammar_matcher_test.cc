// GrammarMatcher semantics (end tokens, refusals, termination) and GrammarCache bounds.
#include "common/grammar/grammar_matcher.h"

#include <map>

#include <gtest/gtest.h>

#include "common/grammar/grammar_cache.h"
#include "tests/common/grammar/test_util.h"

namespace tandem::grammar {
namespace {

// A hand-made vocabulary: single characters, a few multi-byte tokens, two specials.
struct Fixture {
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<TokenId> end_tokens = {0};
  std::map<std::string, TokenId> ids;

  Fixture() {
    std::vector<std::string> bytes = {"<eos>", "<pad>"};
    for (const char* t : {"{", "}", "\"", "a", ":", "1", ",", "{\"a\":", "1}", " ", "b", ""}) bytes.push_back(t);
    std::vector<bool> special(bytes.size(), false);
    special[0] = special[1] = true;
    for (size_t i = 0; i < bytes.size(); ++i) ids[bytes[i]] = static_cast<TokenId>(i);
    vocab = TokenVocabulary::Create(bytes, special);
  }
  std::shared_ptr<TokenGrammar> Grammar(const std::string& spec) {
    auto g = Grammar::Compile(spec);
    TANDEM_CHECK(g.ok()) << g.status().ToString();
    return TokenGrammar::Create(*g, vocab);
  }
  std::vector<uint32_t> Mask(GrammarMatcher& m) {
    std::vector<uint32_t> mask(MaskWords(vocab->size()), 0xFFFFFFFFu);
    m.FillNextTokenMask(mask);
    return mask;
  }
};

constexpr char kSpec[] =
    R"({"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}})";

TEST(GrammarMatcherTest, EndTokenOnlyWhenComplete) {
  Fixture f;
  GrammarMatcher m(f.Grammar(kSpec), f.end_tokens);
  auto mask = f.Mask(m);
  EXPECT_FALSE(MaskBit(mask, 0));
  EXPECT_FALSE(MaskBit(mask, f.ids["<pad>"]));
  EXPECT_FALSE(MaskBit(mask, f.ids[""]));
  EXPECT_TRUE(MaskBit(mask, f.ids["{"]));
  EXPECT_TRUE(MaskBit(mask, f.ids["{\"a\":"]));
  EXPECT_FALSE(MaskBit(mask, f.ids["}"]));
  EXPECT_FALSE(m.AcceptToken(0).ok());
  ASSERT_TRUE(m.AcceptToken(f.ids["{\"a\":"]).ok());
  ASSERT_TRUE(m.AcceptToken(f.ids["1}"]).ok());
  EXPECT_TRUE(m.IsComplete());
  mask = f.Mask(m);
  EXPECT_TRUE(MaskBit(mask, 0));
  EXPECT_FALSE(MaskBit(mask, f.ids[" "]));  // no whitespace after the document
  for (TokenId t = 1; t < f.vocab->size(); ++t) EXPECT_FALSE(MaskBit(mask, t)) << t;
}

TEST(GrammarMatcherTest, RefusedTokenLeavesStateUnchanged) {
  Fixture f;
  GrammarMatcher m(f.Grammar(kSpec), f.end_tokens);
  ASSERT_TRUE(m.AcceptToken(f.ids["{"]).ok());
  const ParseState before = m.state();
  const auto mask_before = f.Mask(m);
  EXPECT_EQ(m.AcceptToken(f.ids["}"]).code(), StatusCode::kInvalidArgument);  // "a" is required
  EXPECT_EQ(m.AcceptToken(f.ids["<pad>"]).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.AcceptToken(f.vocab->size()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.AcceptToken(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(m.state() == before);
  EXPECT_EQ(f.Mask(m), mask_before);
  // Every refused token is exactly a token the mask clears.
  for (TokenId t = 0; t < f.vocab->size(); ++t) {
    GrammarMatcher copy = m;
    EXPECT_EQ(copy.AcceptToken(t).ok(), MaskBit(mask_before, t)) << t;
  }
}

TEST(GrammarMatcherTest, TerminatedAfterEndToken) {
  Fixture f;
  GrammarMatcher m(f.Grammar(R"({"type":"json_object"})"), f.end_tokens);
  ASSERT_TRUE(m.AcceptToken(f.ids["{"]).ok());
  ASSERT_TRUE(m.AcceptToken(f.ids["}"]).ok());
  EXPECT_FALSE(m.IsTerminated());
  ASSERT_TRUE(m.AcceptToken(0).ok());
  EXPECT_TRUE(m.IsTerminated());
  const auto mask = f.Mask(m);
  for (uint32_t w : mask) EXPECT_EQ(w, 0u);
  EXPECT_FALSE(m.AcceptToken(0).ok());
  EXPECT_FALSE(m.AcceptToken(f.ids[" "]).ok());
}

TEST(GrammarMatcherTest, TextEndTokenIsOnlyAnEnd) {
  Fixture f;
  // "}" is also a stop token: never taken as text, allowed only as the end.
  GrammarMatcher m(f.Grammar(R"({"type":"json_object"})"), {0, f.ids["}"]});
  ASSERT_TRUE(m.AcceptToken(f.ids["{"]).ok());
  EXPECT_FALSE(MaskBit(f.Mask(m), f.ids["}"]));
  EXPECT_FALSE(m.AcceptToken(f.ids["}"]).ok());
}

TEST(GrammarCacheTest, SharesAndEvictsLeastRecentlyUsed) {
  Fixture f;
  GrammarCacheOptions options;
  options.max_grammars = 2;
  GrammarCache cache(f.vocab, options);
  auto a = cache.Get(R"({"type":"json_object"})");
  ASSERT_TRUE(a.ok());
  auto a2 = cache.Get(R"({"type":"json_object"})");
  EXPECT_EQ(a->get(), a2->get());
  auto b = cache.Get(kSpec);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(cache.size(), 2);
  ASSERT_TRUE(cache.Get(R"({"type":"json_object"})").ok());  // a is now most recent
  auto c = cache.Get(R"({"type":"json_schema","schema":{"type":"string"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.Get(R"({"type":"json_object"})")->get(), a->get());  // kept
  EXPECT_NE(cache.Get(kSpec)->get(), b->get());                         // evicted, recompiled
  auto bad = cache.Get(R"({"type":"json_schema","schema":{"type":"string","pattern":"x"}})");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(GrammarCacheTest, BoundsMaskCacheBytes) {
  const std::string path = testing::Llama3TokenizerPath();
  testing::TestVocab tv = path.empty() ? testing::TinyVocab() : testing::Llama3Vocab(path);
  GrammarCacheOptions options;
  options.max_total_bytes = 3 * MaskWords(tv.vocab->size()) * 4;
  options.token_grammar.max_cache_bytes = 2 * MaskWords(tv.vocab->size()) * 4 + 2048;
  GrammarCache cache(tv.vocab, options);
  std::vector<uint32_t> mask(MaskWords(tv.vocab->size()));
  for (int i = 0; i < 6; ++i) {
    const std::string spec = R"({"type":"json_schema","schema":{"type":"object","properties":{"k)" +
                             std::to_string(i) + R"(":{"type":"integer"}}}})";
    auto g = cache.Get(spec);
    ASSERT_TRUE(g.ok());
    GrammarMatcher m(*g, tv.end_tokens);
    for (const char* text : {"{", "\"", "k"}) {
      m.FillNextTokenMask(mask);
      for (TokenId t = 0; t < tv.vocab->size(); ++t) {
        if (tv.vocab->is_text(t) && tv.vocab->token_bytes(t) == text) {
          ASSERT_TRUE(m.AcceptToken(t).ok()) << text;
          break;
        }
      }
    }
    EXPECT_LE((*g)->CacheBytes(), options.token_grammar.max_cache_bytes);
  }
  EXPECT_LT(cache.size(), 6);
  EXPECT_GE(cache.size(), 1);
}

}  // namespace
}  // namespace tandem::grammar
