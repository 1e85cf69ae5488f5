#include "common/grammar/mask_lru.h"

namespace tandem::grammar {

const std::vector<uint32_t>* MaskLru::Find(const std::string& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  return &it->second->value;
}

const std::vector<uint32_t>& MaskLru::Insert(std::string key, std::vector<uint32_t> value) {
  if (auto it = map_.find(key); it != map_.end()) {
    bytes_ -= EntryBytes(*it->second);
    entries_.erase(it->second);
    map_.erase(it);
  }
  entries_.push_front(Entry{std::move(key), std::move(value)});
  bytes_ += EntryBytes(entries_.front());
  map_.emplace(entries_.front().key, entries_.begin());
  while (bytes_ > max_bytes_ && entries_.size() > 1) {
    const Entry& last = entries_.back();
    bytes_ -= EntryBytes(last);
    map_.erase(last.key);
    entries_.pop_back();
  }
  return entries_.front().value;
}

void MaskLru::Clear() {
  map_.clear();
  entries_.clear();
  bytes_ = 0;
}

}  // namespace tandem::grammar
