// Unit tests of Tokenizer and IncrementalDetokenizer on the hand-made
// tokenizers of tiny_tokenizers.h (expected ids derived by hand from their
// vocabularies and merge ranks), plus malformed-input handling.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "common/tokenizer/incremental_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/unicode_util.h"
#include "tests/common/tokenizer/tiny_tokenizers.h"

namespace tandem::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

std::unique_ptr<Tokenizer> Load(const std::string& json) {
  auto t = Tokenizer::FromJson(json);
  TANDEM_CHECK(t.ok()) << t.status().ToString();
  return *std::move(t);
}

TEST(TokenizerTest, ByteLevelAppliesMergesByRank) {
  auto t = Load(test_data::TinyByteLevelJson());
  // " the" -> Ġ t h e -> (Ġ,t) -> (h,e) -> (Ġt,he).
  EXPECT_EQ(*t->Encode("the the", false), (Ids{'t', 257, 258}));
  EXPECT_EQ(*t->Encode("hello", false), (Ids{257, 259, 'o'}));
  // Digits are split in runs of at most three.
  EXPECT_EQ(*t->Encode("12345", false), (Ids{'1', '2', '3', '4', '5'}));
  // Non-ASCII bytes map to their byte ids.
  EXPECT_EQ(*t->Encode("\xC3\xA9", false), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(*t->Encode("", false), Ids{});
}

TEST(TokenizerTest, AddedTokensAndPostProcessor) {
  auto t = Load(test_data::TinyByteLevelJson());
  EXPECT_EQ(*t->Encode("a<|end|>b", false), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(*t->Encode("a<|end|>b", true), (Ids{303, 'a', 300, 'b'}));
  EXPECT_EQ(*t->Encode("<tool>", true), (Ids{303, 301}));
  // lstrip: the space before <mask> is absorbed into the token.
  EXPECT_EQ(*t->Encode("a <mask>", false), (Ids{'a', 302}));
  // Partial special-token text is ordinary text.
  EXPECT_EQ(*t->Encode("<|end", false), (Ids{'<', '|', 'e', 'n', 'd'}));
  EXPECT_EQ(*t->Decode(Ids{303, 'a', 300, 301}, false), "<|begin|>a<|end|><tool>");
  EXPECT_EQ(*t->Decode(Ids{303, 'a', 300, 301}, true), "a<tool>");
  EXPECT_TRUE(t->IsSpecial(300));
  EXPECT_FALSE(t->IsSpecial(301));
  EXPECT_EQ(t->VocabSize(), 304);
  EXPECT_EQ(t->TokenToId("<|end|>"), 300);
  EXPECT_EQ(t->TokenToId("he"), 257);
  EXPECT_EQ(t->IdToToken(257), "he");
  EXPECT_EQ(t->IdToToken(9999), std::nullopt);
}

TEST(TokenizerTest, ByteLevelDecodeRepairsInvalidUtf8) {
  auto t = Load(test_data::TinyByteLevelJson());
  EXPECT_EQ(*t->Decode(Ids{0xF0, 0x9F, 0x98, 0x80}, false), "\xF0\x9F\x98\x80");
  EXPECT_EQ(*t->Decode(Ids{'a', 0xF0, 0x9F}, false), "a\xEF\xBF\xBD");
  EXPECT_EQ(*t->Decode(Ids{0xFF, 'b'}, false),
            "\xEF\xBF\xBD"
            "b");
  // Unknown ids are skipped.
  EXPECT_EQ(*t->Decode(Ids{'a', 5000, -1, 'b'}, false), "ab");
}

// TokenBytes gives a token's raw bytes, a piece of a UTF-8 character included (logprobs'
// `bytes`, grammar text), where Decode repairs such a piece to U+FFFD.
TEST(TokenizerTest, TokenBytesAreRawForPiecesOfACharacter) {
  auto t = Load(test_data::TinyByteLevelJson());
  EXPECT_EQ(t->TokenBytes(0xF0), "\xF0");
  EXPECT_EQ(t->TokenBytes(0x9F), "\x9F");
  EXPECT_EQ(t->TokenBytes('a'), "a");
  EXPECT_EQ(t->TokenBytes(257), "he");
  EXPECT_EQ(t->TokenBytes(300), "<|end|>");
  EXPECT_EQ(*t->Decode(Ids{0xF0}, false), "\xEF\xBF\xBD");
  auto sp = Load(test_data::TinySentencePieceJson());
  EXPECT_EQ(sp->TokenBytes(3 + 0xC3), "\xC3");
  EXPECT_EQ(sp->TokenBytes(263), "ab");
}

TEST(TokenizerTest, SentencePieceByteFallback) {
  auto t = Load(test_data::TinySentencePieceJson());
  EXPECT_EQ(*t->Encode("ab", false), (Ids{263}));
  EXPECT_EQ(*t->Encode("ab", true), (Ids{1, 263}));
  EXPECT_EQ(*t->Encode(" ab", false), (Ids{259, 263}));
  EXPECT_EQ(*t->Encode("ba", false), (Ids{259, 261, 260}));
  EXPECT_EQ(*t->Encode("\xC3\xA9", false), (Ids{259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(*t->Decode(Ids{1, 263, 259, 3 + 0xC3, 3 + 0xA9}, true), "ab \xC3\xA9");
  EXPECT_EQ(*t->Decode(Ids{1, 263}, false), "<s> ab");
  // An invalid byte sequence decodes to one U+FFFD per byte.
  EXPECT_EQ(*t->Decode(Ids{3 + 0xC3, 260}, false),
            "\xEF\xBF\xBD"
            "a");
}

TEST(TokenizerTest, RejectsInvalidInput) {
  auto t = Load(test_data::TinyByteLevelJson());
  const auto bad = t->Encode("a\xFF", false);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, MalformedFilesGiveClearErrors) {
  struct Case {
    std::string json;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"", "not valid JSON"},
      {"[1, 2]", "must be a JSON object"},
      {"{}", "no 'model'"},
      {R"({"model": {"type": "Unigram", "vocab": []}})", "unsupported model type"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "not an integer"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})", "not in the vocab"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [1]}})", "a merge must be"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": {"type": "Magic"}})", "unsupported normalizer"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}}})",
       "bad regex"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": -4, "content": "x"}]})",
       "out of range"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "decoder": {"type": "WordPiece"}})", "unsupported decoder"},
      {std::string(100, '[') + std::string(100, ']'), "nested too deeply"},
  };
  for (const auto& c : cases) {
    const auto r = Tokenizer::FromJson(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(Tokenizer::FromFile("/nonexistent/tokenizer.json").status().code(), StatusCode::kNotFound);
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  auto t = Load(test_data::TinyByteLevelJson());
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i)
    texts.push_back("the hello " + std::to_string(i * 7919) + " the" + std::string(i % 5, 'l'));
  std::vector<Ids> want;
  for (const auto& s : texts) want.push_back(*t->Encode(s, true));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i * (k + 1) + round) % texts.size();
          if (*t->Encode(texts[j], true) != want[j]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Streams `ids`, checking every chunk is valid UTF-8; returns the chunks.
std::vector<std::string> Stream(const Tokenizer& t, const Ids& ids, bool skip) {
  IncrementalDetokenizer inc(t, skip);
  std::vector<std::string> chunks;
  for (TokenId id : ids) {
    chunks.push_back(inc.Add(id));
    EXPECT_TRUE(IsValidUtf8(chunks.back()));
  }
  chunks.push_back(inc.Finish());
  return chunks;
}

TEST(IncrementalDetokenizerTest, HoldsBackPartialCharacters) {
  auto t = Load(test_data::TinyByteLevelJson());
  const auto chunks = Stream(*t, Ids{'a', 0xF0, 0x9F, 0x98, 0x80, 'b'}, false);
  EXPECT_EQ(chunks, (std::vector<std::string>{"a", "", "", "", "\xF0\x9F\x98\x80", "b", ""}));
}

TEST(IncrementalDetokenizerTest, FinishFlushesInvalidTail) {
  auto t = Load(test_data::TinyByteLevelJson());
  const auto chunks = Stream(*t, Ids{'a', 0xF0, 0x9F}, false);
  EXPECT_EQ(chunks, (std::vector<std::string>{"a", "", "", "\xEF\xBF\xBD"}));
}

TEST(IncrementalDetokenizerTest, SentencePieceLeadingSpaces) {
  auto t = Load(test_data::TinySentencePieceJson());
  // "<s>", "▁ab", "▁", "b", "▁a": the first piece's space is stripped, later ones kept.
  const Ids ids{1, 263, 259, 261, 262};
  EXPECT_EQ(Stream(*t, ids, true), (std::vector<std::string>{"", "ab", " ", "b", " a", ""}));
  EXPECT_EQ(Stream(*t, ids, false), (std::vector<std::string>{"<s>", " ab", " ", "b", " a", ""}));
  // A byte-fallback run is held until it ends (here: at Finish).
  const auto chunks = Stream(*t, Ids{263, 3 + 0xC3, 3 + 0xA9}, true);
  EXPECT_EQ(chunks, (std::vector<std::string>{"ab", "", "", "\xC3\xA9"}));
}

TEST(IncrementalDetokenizerTest, ByteRunThatTurnsInvalidMatchesFullDecode) {
  auto t = Load(test_data::TinySentencePieceJson());
  // '~' is a valid byte alone, but the run ~ FD ~ 84 A9 is invalid UTF-8, so
  // the full decode turns all five bytes into U+FFFD.
  const Ids ids{3 + '~', 3 + 0xFD, 3 + '~', 3 + 0x84, 3 + 0xA9, 260};
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(*t->Decode(ids, false), fffd + fffd + fffd + fffd + fffd + "a");
  const auto chunks = Stream(*t, ids, false);
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "", "", "", fffd + fffd + fffd + fffd + fffd + "a", ""}));
}

}  // namespace
}  // namespace tandem::tokenizer
