// Fuzz target for tokenizer.json parsing, encode and decode. The first input
// byte picks the mode:
//   0: the rest is a tokenizer.json document (must load or fail cleanly);
//   1/2: the rest is text for the tiny byte-level / SentencePiece tokenizer:
//        encode must succeed exactly for valid UTF-8, the streamed decode must
//        equal the full decode, and byte-level decode(encode(s)) must be s
//        (unless s has <mask>, whose lstrip drops the space before it);
//   3: the rest is a list of 16-bit ids to decode fully and incrementally.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/tokenizer/incremental_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/unicode_util.h"
#include "tests/common/tokenizer/tiny_tokenizers.h"

namespace {

using tandem::TokenId;
using tandem::tokenizer::IncrementalDetokenizer;
using tandem::tokenizer::Tokenizer;

const Tokenizer& Tiny(bool sentencepiece) {
  static const auto* byte_level = Tokenizer::FromJson(tandem::tokenizer::test_data::TinyByteLevelJson())->release();
  static const auto* sp = Tokenizer::FromJson(tandem::tokenizer::test_data::TinySentencePieceJson())->release();
  return sentencepiece ? *sp : *byte_level;
}

void Require(bool ok) {
  if (!ok) std::abort();
}

void CheckStreaming(const Tokenizer& t, const std::vector<TokenId>& ids) {
  for (bool skip : {false, true}) {
    const auto full = t.Decode(ids, skip);
    Require(full.ok() && tandem::tokenizer::IsValidUtf8(*full));
    IncrementalDetokenizer inc(t, skip);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string chunk = inc.Add(id);
      Require(tandem::tokenizer::IsValidUtf8(chunk));
      streamed += chunk;
    }
    streamed += inc.Finish();
    Require(streamed == *full);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto t = Tokenizer::FromJson(rest);
      if (t.ok()) (void)(*t)->Encode("hello world", true);
      return 0;
    }
    case 1:
    case 2: {
      const Tokenizer& t = Tiny(data[0] % 4 == 2);
      const auto ids = t.Encode(rest, data[0] >= 128);
      Require(ids.ok() == tandem::tokenizer::IsValidUtf8(rest));
      if (!ids.ok()) return 0;
      for (TokenId id : *ids) Require(id >= 0 && id < t.VocabSize());
      CheckStreaming(t, *ids);
      // Lossless except that <mask> (lstrip) absorbs the whitespace before it.
      if (data[0] % 4 == 1 && data[0] < 128 && rest.find("<mask>") == std::string_view::npos) {
        Require(*t.Decode(*ids, false) == rest);
      }
      return 0;
    }
    default: {
      std::vector<TokenId> ids;
      for (size_t i = 0; i + 1 < rest.size(); i += 2) {
        ids.push_back(
            static_cast<TokenId>((static_cast<uint8_t>(rest[i]) << 8 | static_cast<uint8_t>(rest[i + 1])) % 320));
      }
      CheckStreaming(Tiny(data[0] & 4), ids);
      return 0;
    }
  }
}
