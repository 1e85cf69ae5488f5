// StringTokenTables: for each step of the string automaton (string_dfa.h), the
// tokens that stay inside an open JSON string and the tokens that close it.
// They depend on the vocabulary only, so every grammar's string states share
// them: the mask of an open string is the inside set (cut by a length bound)
// plus the closing tokens whose rest fits what follows the string.
// Thread rule: immutable after construction; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/base/ids.h"
#include "common/grammar/string_dfa.h"
#include "common/grammar/token_trie.h"

namespace tandem::grammar {

struct StringStepTable {
  struct Exit {
    TokenId token = 0;
    uint16_t quote_pos = 0;     // index of the closing '"' in the token's bytes
    uint16_t chars_before = 0;  // code points started before it
  };
  std::vector<uint32_t> inside_mask;    // tokens whose bytes all stay inside the string
  std::vector<TokenId> inside_by_chars; // the same tokens, by code points started, ascending
  std::vector<int32_t> chars_offsets;   // inside_by_chars[chars_offsets[k]..[k+1]) start k code points
  std::vector<Exit> exits;              // tokens that close the string (their prefix stays inside)

  // Most code points an inside token starts.
  int max_chars() const { return static_cast<int>(chars_offsets.size()) - 2; }
};

class StringTokenTables {
 public:
  StringTokenTables(const TokenTrie& trie, int vocab_size);

  const StringStepTable& table(uint8_t step) const { return tables_[step]; }

 private:
  std::array<StringStepTable, kNumStringSteps> tables_;
};

}  // namespace tandem::grammar
