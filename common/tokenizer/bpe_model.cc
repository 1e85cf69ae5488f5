#include "common/tokenizer/bpe_model.h"

#include <cstdio>
#include <limits>
#include <queue>

#include "common/tokenizer/unicode_util.h"

namespace tandem::tokenizer {
namespace {

constexpr size_t kMaxVocab = 16u << 20;

// A merge is "a b" (older files) or ["a", "b"].
Status ParseMerge(const nlohmann::json& m, std::string* a, std::string* b) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ', 1);
    if (space == std::string::npos) return InvalidArgumentError("bad merge '" + s + "'");
    *a = s.substr(0, space);
    *b = s.substr(space + 1);
    return Status::Ok();
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *a = m[0].get<std::string>();
    *b = m[1].get<std::string>();
    return Status::Ok();
  }
  return InvalidArgumentError("a merge must be \"a b\" or [\"a\", \"b\"]");
}

std::string OptionalString(const nlohmann::json& spec, const char* key) {
  const auto it = spec.find(key);
  return (it != spec.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

}  // namespace

StatusOr<BpeModel> BpeModel::FromJson(const nlohmann::json& spec) {
  if (!spec.is_object()) return InvalidArgumentError("'model' must be an object");
  const std::string type = spec.value("type", std::string("BPE"));
  if (type != "BPE") return InvalidArgumentError("unsupported model type '" + type + "'");
  const auto vocab_it = spec.find("vocab");
  if (vocab_it == spec.end() || !vocab_it->is_object()) {
    return InvalidArgumentError("BPE model needs a 'vocab' object");
  }
  if (vocab_it->size() > kMaxVocab) return InvalidArgumentError("vocab too large");
  BpeModel m;
  m.vocab_.reserve(vocab_it->size());
  for (const auto& [token, id_json] : vocab_it->items()) {
    if (!id_json.is_number_integer()) return InvalidArgumentError("vocab id of '" + token + "' is not an integer");
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(kMaxVocab)) {
      return InvalidArgumentError("vocab id out of range for '" + token + "'");
    }
    if (static_cast<size_t>(id) >= m.id_to_token_.size()) m.id_to_token_.resize(id + 1);
    m.id_to_token_[id] = token;
    m.vocab_.emplace(token, static_cast<TokenId>(id));
  }
  m.continuing_subword_prefix_ = OptionalString(spec, "continuing_subword_prefix");
  m.end_of_word_suffix_ = OptionalString(spec, "end_of_word_suffix");
  const auto merges_it = spec.find("merges");
  if (merges_it != spec.end() && !merges_it->is_null()) {
    if (!merges_it->is_array()) return InvalidArgumentError("'merges' must be an array");
    std::vector<std::pair<uint64_t, Merge>> entries;
    entries.reserve(merges_it->size());
    std::string a, b;
    int rank = 0;
    for (const auto& entry : *merges_it) {
      TANDEM_RETURN_IF_ERROR(ParseMerge(entry, &a, &b));
      const auto ia = m.vocab_.find(a), ib = m.vocab_.find(b);
      std::string merged =
          a + b.substr(b.compare(0, m.continuing_subword_prefix_.size(), m.continuing_subword_prefix_) == 0
                           ? m.continuing_subword_prefix_.size()
                           : 0);
      const auto im = m.vocab_.find(merged);
      if (ia == m.vocab_.end() || ib == m.vocab_.end() || im == m.vocab_.end()) {
        return InvalidArgumentError("merge '" + a + " " + b + "' uses a token not in the vocab");
      }
      entries.emplace_back(PairKey(ia->second, ib->second), Merge{rank++, im->second});
    }
    m.merges_.Build(entries);
  }
  const std::string unk = OptionalString(spec, "unk_token");
  if (!unk.empty()) {
    const auto it = m.vocab_.find(unk);
    if (it != m.vocab_.end()) m.unk_id_ = it->second;
  }
  m.fuse_unk_ = spec.value("fuse_unk", false) == true;
  constexpr std::string_view kMeta = "\xE2\x96\x81";
  m.split_before_metaspace_ =
      m.vocab_.count(std::string(kMeta)) > 0 && m.continuing_subword_prefix_.empty() && m.end_of_word_suffix_.empty();
  for (const auto& [token, id] : m.vocab_) {
    if (!m.split_before_metaspace_) break;
    for (size_t p = token.find(kMeta, 1); p != std::string::npos; p = token.find(kMeta, p + 1)) {
      if (p < kMeta.size() || token.compare(p - kMeta.size(), kMeta.size(), kMeta) != 0) {
        m.split_before_metaspace_ = false;
        break;
      }
    }
  }
  m.byte_fallback_ =
      spec.contains("byte_fallback") && spec["byte_fallback"].is_boolean() && spec["byte_fallback"].get<bool>();
  m.ignore_merges_ =
      spec.contains("ignore_merges") && spec["ignore_merges"].is_boolean() && spec["ignore_merges"].get<bool>();
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    const auto it = m.vocab_.find(name);
    m.byte_ids_[b] = (m.byte_fallback_ && it != m.vocab_.end()) ? it->second : -1;
  }
  return m;
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const {
  size_t pos = 0;
  bool last_was_unk = false;
  std::string piece;
  while (pos < word.size()) {
    const size_t start = pos;
    NextCodePoint(word, &pos);
    piece.clear();
    if (start > 0) piece = continuing_subword_prefix_;
    piece.append(word.substr(start, pos - start));
    if (pos == word.size()) piece.append(end_of_word_suffix_);
    const auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      symbols->push_back(it->second);
      last_was_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t i = start; i < pos; ++i) all = all && byte_ids_[static_cast<unsigned char>(word[i])] >= 0;
      if (all) {
        for (size_t i = start; i < pos; ++i) symbols->push_back(byte_ids_[static_cast<unsigned char>(word[i])]);
        last_was_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(fuse_unk_ && last_was_unk)) symbols->push_back(*unk_id_);
      last_was_unk = true;
    }
  }
}

namespace {
constexpr uint64_t kEmptyKey = ~uint64_t{0};
}  // namespace

uint64_t BpeModel::MergeTable::Mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

void BpeModel::MergeTable::Build(const std::vector<std::pair<uint64_t, Merge>>& entries) {
  size_t capacity = 16;
  while (capacity < entries.size() * 2) capacity <<= 1;
  keys_.assign(capacity, kEmptyKey);
  values_.assign(capacity, Merge{0, 0});
  mask_ = capacity - 1;
  for (const auto& [key, merge] : entries) {
    uint64_t slot = Mix(key) & mask_;
    while (keys_[slot] != kEmptyKey && keys_[slot] != key) slot = (slot + 1) & mask_;
    if (keys_[slot] == key) continue;  // first (lowest-ranked) occurrence wins
    keys_[slot] = key;
    values_[slot] = merge;
  }
}

const BpeModel::Merge* BpeModel::MergeTable::Find(uint64_t key) const {
  if (keys_.empty()) return nullptr;
  uint64_t slot = Mix(key) & mask_;
  while (true) {
    if (keys_[slot] == key) return &values_[slot];
    if (keys_[slot] == kEmptyKey) return nullptr;
    slot = (slot + 1) & mask_;
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* ids) const {
  if (word.empty()) return;
  if (word.size() <= kMaxCachedWordBytes) {
    EncodeCached(word, ids);
    return;
  }
  if (!split_before_metaspace_ || ignore_merges_) {
    EncodeUncached(word, ids);
    return;
  }
  constexpr std::string_view kMeta = "\xE2\x96\x81";
  size_t start = 0;
  size_t pos = word.find(kMeta, 1);
  while (pos != std::string_view::npos) {
    // Split only where a non-metaspace character precedes the metaspace.
    if (pos < kMeta.size() || word.substr(pos - kMeta.size(), kMeta.size()) != kMeta) {
      EncodeWord(word.substr(start, pos - start), ids);
      start = pos;
    }
    pos = word.find(kMeta, pos + kMeta.size());
  }
  const std::string_view last = word.substr(start);
  if (last.size() == word.size()) {
    EncodeUncached(word, ids);
  } else {
    EncodeWord(last, ids);
  }
}

void BpeModel::EncodeCached(std::string_view word, std::vector<TokenId>* ids) const {
  CacheShard& shard = (*cache_)[std::hash<std::string_view>()(word) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto it = shard.words.find(std::string(word));
    if (it != shard.words.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t begin = ids->size();
  EncodeUncached(word, ids);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.words.size() >= kCacheWordsPerShard) shard.words.clear();
  shard.words.emplace(std::string(word), std::vector<TokenId>(ids->begin() + begin, ids->end()));
}

void BpeModel::EncodeUncached(std::string_view word, std::vector<TokenId>* ids) const {
  if (ignore_merges_) {
    const auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  std::vector<TokenId> symbols;
  InitialSymbols(word, &symbols);
  if (symbols.size() > 1) ApplyMerges(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

// Repeatedly applies the lowest-ranked merge, leftmost first, over a linked
// list of symbols with a heap of candidate pairs (stale entries are skipped),
// so long words cost O(n log n).
void BpeModel::ApplyMerges(std::vector<TokenId>* symbols) const {
  if (symbols->size() <= 16) {
    // Short words: a direct scan for the leftmost lowest-ranked pair.
    std::vector<TokenId>& s = *symbols;
    while (s.size() > 1) {
      const Merge* best = nullptr;
      size_t best_pos = 0;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const Merge* m = merges_.Find(PairKey(s[i], s[i + 1]));
        if (m != nullptr && (best == nullptr || m->rank < best->rank)) {
          best = m;
          best_pos = i;
        }
      }
      if (best == nullptr) return;
      s[best_pos] = best->merged_id;
      s.erase(s.begin() + best_pos + 1);
    }
    return;
  }
  const int n = static_cast<int>(symbols->size());
  std::vector<TokenId>& id = *symbols;
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int rank;
    int pos;
    TokenId merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    if (const Merge* m = merges_.Find(PairKey(id[left], id[next[left]]))) heap.push({m->rank, left, m->merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    const Merge* m = merges_.Find(PairKey(id[top.pos], id[right]));
    if (m == nullptr || m->rank != top.rank || m->merged_id != top.merged) continue;
    id[top.pos] = top.merged;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  int out = 0;
  for (int i = 0; i < n; ++i) {
    if (alive[i]) id[out++] = id[i];
  }
  id.resize(out);
}

std::optional<TokenId> BpeModel::TokenToId(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  return &id_to_token_[id];
}

}  // namespace tandem::tokenizer
