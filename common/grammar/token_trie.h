// TokenTrie: the byte trie of a vocabulary's text tokens, stored in preorder
// so a depth-first walk is a loop over node indices that skips a rejected
// node's whole subtree in one jump.
// Thread rule: immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/base/ids.h"

namespace tandem::grammar {

class TokenTrie {
 public:
  // Indexes the tokens with is_text[id] (all with non-empty bytes). REQUIRES: equal sizes.
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& is_text);

  int num_nodes() const { return static_cast<int>(bytes_.size()); }
  // Node i (0 <= i < num_nodes()): the byte on the edge into it, its depth (1 = a child of the
  // root), one past the last node of its subtree, and the tokens whose bytes end there.
  uint8_t byte(int i) const { return bytes_[i]; }
  int depth(int i) const { return depths_[i]; }
  int subtree_end(int i) const { return subtree_ends_[i]; }
  std::span<const TokenId> tokens(int i) const {
    return {tokens_.data() + token_begins_[i], tokens_.data() + token_begins_[i + 1]};
  }
  // Tokens of the subtree of node i (preorder keeps them contiguous).
  std::span<const TokenId> subtree_tokens(int i) const {
    return {tokens_.data() + token_begins_[i], tokens_.data() + token_begins_[subtree_ends_[i]]};
  }
  int max_depth() const { return max_depth_; }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<uint16_t> depths_;
  std::vector<int32_t> subtree_ends_;
  std::vector<int32_t> token_begins_;  // size num_nodes() + 1
  std::vector<TokenId> tokens_;
  int max_depth_ = 0;
};

}  // namespace tandem::grammar
