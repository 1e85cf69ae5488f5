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
    m.merges_.reserve(merges_it->size());
    std::string a, b;
    int rank = 0;
    for (const auto& entry : *merges_it) {
      TANDEM_RETURN_IF_ERROR(ParseMerge(entry, &a, &b));
      const auto ia = m.vocab_.find(a), ib = m.vocab_.find(b);
      std::string merged = a + b.substr(b.compare(0, m.continuing_subword_prefix_.size(),
                                                  m.continuing_subword_prefix_) == 0
                                            ? m.continuing_subword_prefix_.size()
                                            : 0);
      const auto im = m.vocab_.find(merged);
      if (ia == m.vocab_.end() || ib == m.vocab_.end() || im == m.vocab_.end()) {
        return InvalidArgumentError("merge '" + a + " " + b + "' uses a token not in the vocab");
      }
      m.merges_.emplace(PairKey(ia->second, ib->second), Merge{rank++, im->second});
    }
  }
  const std::string unk = OptionalString(spec, "unk_token");
  if (!unk.empty()) {
    const auto it = m.vocab_.find(unk);
    if (it != m.vocab_.end()) m.unk_id_ = it->second;
  }
  m.fuse_unk_ = spec.value("fuse_unk", false) == true;
  m.byte_fallback_ = spec.contains("byte_fallback") && spec["byte_fallback"].is_boolean() &&
                     spec["byte_fallback"].get<bool>();
  m.ignore_merges_ = spec.contains("ignore_merges") && spec["ignore_merges"].is_boolean() &&
                     spec["ignore_merges"].get<bool>();
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

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* ids) const {
  if (word.empty()) return;
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
    const auto it = merges_.find(PairKey(id[left], id[next[left]]));
    if (it != merges_.end()) heap.push({it->second.rank, left, it->second.merged_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    const auto it = merges_.find(PairKey(id[top.pos], id[right]));
    if (it == merges_.end() || it->second.rank != top.rank || it->second.merged_id != top.merged) continue;
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
