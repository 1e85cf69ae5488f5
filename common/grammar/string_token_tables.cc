#include "common/grammar/string_token_tables.h"

#include <algorithm>

namespace tandem::grammar {
namespace {

StringStepTable BuildTable(const TokenTrie& trie, int vocab_size, uint8_t first_step) {
  StringStepTable table;
  table.inside_mask.assign((vocab_size + 31) / 32, 0);
  std::vector<std::pair<uint16_t, TokenId>> inside;  // (chars, token)
  std::vector<uint8_t> steps(trie.max_depth() + 1);
  std::vector<uint16_t> chars(trie.max_depth() + 1);
  steps[0] = first_step;
  chars[0] = 0;
  for (int i = 0; i < trie.num_nodes();) {
    const int d = trie.depth(i);
    bool starts_char = false;
    const uint8_t next = StringByte(steps[d - 1], trie.byte(i), &starts_char);
    if (next == kStrClose) {
      for (TokenId t : trie.subtree_tokens(i)) {
        table.exits.push_back({t, static_cast<uint16_t>(d - 1), chars[d - 1]});
      }
      i = trie.subtree_end(i);
      continue;
    }
    if (next == kStrReject) {
      i = trie.subtree_end(i);
      continue;
    }
    steps[d] = next;
    chars[d] = static_cast<uint16_t>(chars[d - 1] + (starts_char ? 1 : 0));
    for (TokenId t : trie.tokens(i)) {
      table.inside_mask[t / 32] |= 1u << (t % 32);
      inside.push_back({chars[d], t});
    }
    ++i;
  }
  std::sort(inside.begin(), inside.end());
  const int max_chars = inside.empty() ? 0 : inside.back().first;
  table.chars_offsets.assign(max_chars + 2, 0);
  for (const auto& [c, t] : inside) {
    table.inside_by_chars.push_back(t);
    ++table.chars_offsets[c + 1];
  }
  for (int k = 1; k < max_chars + 2; ++k) table.chars_offsets[k] += table.chars_offsets[k - 1];
  return table;
}

}  // namespace

StringTokenTables::StringTokenTables(const TokenTrie& trie, int vocab_size) {
  for (uint8_t step = 0; step < kNumStringSteps; ++step) tables_[step] = BuildTable(trie, vocab_size, step);
}

}  // namespace tandem::grammar
