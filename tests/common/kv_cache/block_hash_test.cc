#include "common/kv_cache/block_hash.h"

#include <unordered_set>

#include <gtest/gtest.h>

namespace tandem::kv_cache {
namespace {

// Golden values from Python's hashlib over the documented encoding:
// parent(32) | u64le len | salt | u64le len | model | u64le len | int32le tokens.
TEST(BlockHashTest, MatchesIndependentSha256OfDocumentedEncoding) {
  std::vector<TokenId> t0 = {1, 2, 3, 4};
  std::vector<TokenId> t1 = {5, 6, 7, -8};
  BlockHash b0 = HashBlock(BlockHash{}, "tenant-a", "llama-3-8b", t0);
  BlockHash b1 = HashBlock(b0, "tenant-a", "llama-3-8b", t1);
  EXPECT_EQ(b0.ToHex(), "41596de860f7e51dd7ff14b22ebea8cf3f7dc159de0c6b8cc8547e493c1a725f");
  EXPECT_EQ(b1.ToHex(), "23ef062e3b7206353aba0437a0033602246c0495f6da6b4a7c482477a9f640b4");
}

TEST(BlockHashTest, EveryInputChangesTheHash) {
  std::vector<TokenId> t = {10, 20, 30, 40};
  std::vector<TokenId> t2 = {10, 20, 30, 41};
  BlockHash parent = HashBlock(BlockHash{}, "s", "m", t);
  std::unordered_set<std::string> seen = {
      HashBlock(BlockHash{}, "s", "m", t).ToHex(),
      HashBlock(parent, "s", "m", t).ToHex(),
      HashBlock(BlockHash{}, "s2", "m", t).ToHex(),
      HashBlock(BlockHash{}, "s", "m2", t).ToHex(),
      HashBlock(BlockHash{}, "s", "m", t2).ToHex(),
      // Field boundaries are length-prefixed: ("sm","") differs from ("s","m").
      HashBlock(BlockHash{}, "sm", "", t).ToHex(),
  };
  EXPECT_EQ(seen.size(), 6u);
}

TEST(BlockHashTest, ExtendHashesOnlyFullBlocksIncrementally) {
  std::vector<TokenId> tokens;
  for (int i = 0; i < 11; ++i) tokens.push_back(100 + i);
  std::vector<BlockHash> all;
  EXPECT_EQ(ExtendBlockHashes("s", "m", 4, tokens, &all), 2);  // 11 tokens: 2 full blocks of 4
  std::vector<BlockHash> inc;
  EXPECT_EQ(ExtendBlockHashes("s", "m", 4, std::span<const TokenId>(tokens).first(5), &inc), 1);
  EXPECT_EQ(ExtendBlockHashes("s", "m", 4, tokens, &inc), 1);
  EXPECT_EQ(ExtendBlockHashes("s", "m", 4, tokens, &inc), 0);
  EXPECT_EQ(inc, all);
  EXPECT_EQ(all[0], HashBlock(BlockHash{}, "s", "m", std::span<const TokenId>(tokens).first(4)));
  EXPECT_EQ(all[1], HashBlock(all[0], "s", "m", std::span<const TokenId>(tokens).subspan(4, 4)));
}

}  // namespace
}  // namespace tandem::kv_cache
