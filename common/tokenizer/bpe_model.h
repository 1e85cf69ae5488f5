// The BPE `model` of tokenizer.json: vocabulary, ranked merges, unknown-token
// and byte-fallback handling. Turns one pre-tokenized word into ids.
// Immutable after FromJson; thread-safe (the internal word cache is guarded
// by per-shard mutexes).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::tokenizer {

class BpeModel {
 public:
  // Fails on a missing/ill-typed vocab or merges, a merge naming an unknown
  // token, or an unknown model type.
  static StatusOr<BpeModel> FromJson(const nlohmann::json& spec);

  // Appends the ids of `word` to *ids.
  void EncodeWord(std::string_view word, std::vector<TokenId>* ids) const;

  std::optional<TokenId> TokenToId(std::string_view token) const;
  // Token text for ids of the model vocabulary (not added tokens).
  const std::string* IdToToken(TokenId id) const;
  TokenId MaxId() const { return static_cast<TokenId>(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    int rank;
    TokenId merged_id;
  };
  // Open-addressing table (pair key -> merge): one probe sequence per lookup.
  class MergeTable {
   public:
    void Build(const std::vector<std::pair<uint64_t, Merge>>& entries);
    const Merge* Find(uint64_t key) const;

   private:
    static uint64_t Mix(uint64_t k);
    std::vector<uint64_t> keys_;  // kEmpty marks a free slot
    std::vector<Merge> values_;
    uint64_t mask_ = 0;
  };
  // Recently encoded words -> ids; a shard is cleared when it fills up.
  struct CacheShard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<TokenId>> words;
  };
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheWordsPerShard = 8192;
  static constexpr size_t kMaxCachedWordBytes = 64;
  void EncodeUncached(std::string_view word, std::vector<TokenId>* ids) const;
  void EncodeCached(std::string_view word, std::vector<TokenId>* ids) const;
  static uint64_t PairKey(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const;
  void ApplyMerges(std::vector<TokenId>* symbols) const;

  std::unordered_map<std::string, TokenId> vocab_;
  std::vector<std::string> id_to_token_;
  MergeTable merges_;
  std::shared_ptr<std::array<CacheShard, kCacheShards>> cache_ =
      std::make_shared<std::array<CacheShard, kCacheShards>>();
  std::optional<TokenId> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  // True when no vocab token has U+2581 right after another character: then
  // no merge can span "x|▁", and long SentencePiece words are encoded
  // piece by piece with identical results.
  bool split_before_metaspace_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  TokenId byte_ids_[256];  // <0xXX> ids when byte_fallback_, else -1
};

}  // namespace tandem::tokenizer
