#include "common/grammar/token_trie.h"

#include <algorithm>

#include "common/base/check.h"

namespace tandem::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<bool>& is_text) {
  TANDEM_CHECK(token_bytes.size() == is_text.size()) << "token_bytes and is_text differ in size";
  std::vector<TokenId> ids;
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (is_text[id]) ids.push_back(static_cast<TokenId>(id));
  }
  std::sort(ids.begin(), ids.end(), [&](TokenId x, TokenId y) {
    return token_bytes[x] != token_bytes[y] ? token_bytes[x] < token_bytes[y] : x < y;
  });
  // Sorted order visits the trie in preorder: each token adds the nodes past its common prefix
  // with the previous token, and a node's subtree ends when the path pops it.
  std::vector<int> path;  // node index at each depth - 1
  const std::string* previous = nullptr;
  for (TokenId id : ids) {
    const std::string& bytes = token_bytes[id];
    TANDEM_CHECK(!bytes.empty()) << "text token " << id << " has no bytes";
    TANDEM_CHECK(bytes.size() < 65535) << "token " << id << " too long";
    size_t common = 0;
    if (previous != nullptr) {
      const size_t limit = std::min(previous->size(), bytes.size());
      while (common < limit && (*previous)[common] == bytes[common]) ++common;
    }
    while (path.size() > common) {
      subtree_ends_[path.back()] = num_nodes();
      path.pop_back();
    }
    for (size_t d = common; d < bytes.size(); ++d) {
      path.push_back(num_nodes());
      bytes_.push_back(static_cast<uint8_t>(bytes[d]));
      depths_.push_back(static_cast<uint16_t>(d + 1));
      subtree_ends_.push_back(-1);
      token_begins_.push_back(static_cast<int32_t>(tokens_.size()));
    }
    tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int>(bytes.size()));
    previous = &bytes;
  }
  while (!path.empty()) {
    subtree_ends_[path.back()] = num_nodes();
    path.pop_back();
  }
  token_begins_.push_back(static_cast<int32_t>(tokens_.size()));
}

}  // namespace tandem::grammar
