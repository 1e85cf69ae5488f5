// MaskLru: a byte-bounded least-recently-used map from a key (bytes) to a
// vector of 32-bit words (token masks and token lists of TokenGrammar).
// Thread rule: not thread-safe; one owner.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::grammar {

class MaskLru {
 public:
  explicit MaskLru(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The value of `key` (marked most recently used), or nullptr. The pointer is valid until the
  // next Insert.
  const std::vector<uint32_t>* Find(const std::string& key);
  // Adds (or replaces) `key`, evicting the least recently used entries while over max_bytes
  // (never the new one).
  const std::vector<uint32_t>& Insert(std::string key, std::vector<uint32_t> value);

  // Bytes held: keys, values and a fixed overhead per entry.
  size_t bytes() const { return bytes_; }
  size_t size() const { return map_.size(); }
  void Clear();

 private:
  struct Entry {
    std::string key;
    std::vector<uint32_t> value;
  };
  static size_t EntryBytes(const Entry& e) { return e.key.size() + e.value.size() * sizeof(uint32_t) + 96; }

  size_t max_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string_view, std::list<Entry>::iterator> map_;  // views into entries_' keys
};

}  // namespace tandem::grammar
