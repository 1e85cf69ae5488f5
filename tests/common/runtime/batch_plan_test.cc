// BatchPlan packs exactly the metadata the ops read, computed by hand here.
#include "common/runtime/batch_plan.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace tandem::runtime {
namespace {

BatchLimits Limits() {
  return {.vocab_size = 100,
          .block_size = 4,
          .num_blocks = 16,
          .max_model_len = 64,
          .max_num_tokens = 32,
          .max_num_seqs = 4,
          .max_logits_rows = 8};
}

TEST(BatchPlanTest, PacksMixedPrefillAndDecode) {
  std::vector<TokenId> a = {5, 6, 7, 8, 9}, b = {42};
  std::vector<BlockId> ta = {3, 9}, tb = {1, 2, 7};
  // a: prefill of 5 from position 2 (context_len 7, all logits); b: decode at position 9 (context_len 10).
  std::vector<SeqChunk> chunks = {{a, 2, ta, true, true}, {b, 9, tb, true}};
  auto plan = BatchPlan::Build(chunks, Limits());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->num_tokens, 6);
  EXPECT_EQ(plan->num_seqs, 2);
  EXPECT_EQ(plan->num_logits_rows, 6);
  EXPECT_EQ(plan->max_query_len, 5);
  EXPECT_EQ(plan->max_context_len, 10);
  EXPECT_EQ(plan->table_width, 3);
  auto at = [&](size_t offset, size_t count) {
    return std::vector<int32_t>(plan->packed.begin() + offset, plan->packed.begin() + offset + count);
  };
  EXPECT_EQ(at(plan->token_ids_offset, 6), (std::vector<int32_t>{5, 6, 7, 8, 9, 42}));
  EXPECT_EQ(at(plan->positions_offset, 6), (std::vector<int32_t>{2, 3, 4, 5, 6, 9}));
  EXPECT_EQ(at(plan->query_start_offset, 3), (std::vector<int32_t>{0, 5, 6}));
  EXPECT_EQ(at(plan->context_lens_offset, 2), (std::vector<int32_t>{7, 10}));
  EXPECT_EQ(at(plan->block_tables_offset, 6), (std::vector<int32_t>{3, 9, kInvalidBlock, 1, 2, 7}));
  EXPECT_EQ(at(plan->logits_rows_offset, 6), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // slot = block * 4 + pos % 4: positions 2,3 in block 3; 4,5,6 in block 9; 9 in tb[2] = block 7.
  EXPECT_EQ(plan->slot_mapping, (std::vector<int64_t>{14, 15, 36, 37, 38, 29}));
  EXPECT_EQ(plan->packed.size(), plan->logits_rows_offset + 6);
  EXPECT_LE(plan->packed.size(), MaxPackedSize(Limits()));
}

TEST(BatchPlanTest, TableWidthIsBucketedAndPadded) {
  // 1..4 are their own buckets; then 6, 8, 12, 16, 24 ...; never past max_model_len's width.
  const std::vector<int> expected = {1, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16, 16, 16, 16, 24};
  for (int blocks = 1; blocks <= static_cast<int>(expected.size()); ++blocks) {
    EXPECT_EQ(TableWidthBucket(blocks, 1000), expected[blocks - 1]) << blocks << " blocks";
  }
  EXPECT_EQ(TableWidthBucket(13, 14), 14);
  EXPECT_EQ(TableWidthBucket(97, 1 << 20), 128);
  std::set<int> widths;
  for (int blocks = 1; blocks <= 512; ++blocks) widths.insert(TableWidthBucket(blocks, 512));
  EXPECT_EQ(widths.size(), 18u);  // an 8K context in 16-token blocks: 18 shapes, not 512

  // A decode step at position 20 uses 6 blocks of 4 tokens -> width 6, the rest padded.
  std::vector<TokenId> t = {7};
  std::vector<BlockId> table = {0, 1, 2, 3, 4, 5};
  auto plan = BatchPlan::Build(std::vector<SeqChunk>{{t, 20, table, true}}, Limits());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->table_width, 6);
  std::vector<TokenId> u = {8};
  std::vector<BlockId> five = {0, 1, 2, 3, 4};
  plan = BatchPlan::Build(std::vector<SeqChunk>{{u, 16, five, true}}, Limits());
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->table_width, 6);  // 5 blocks, bucket 6: one padding entry
  EXPECT_EQ(std::vector<int32_t>(plan->packed.begin() + plan->block_tables_offset,
                                 plan->packed.begin() + plan->block_tables_offset + 6),
            (std::vector<int32_t>{0, 1, 2, 3, 4, kInvalidBlock}));
}

TEST(BatchPlanTest, DecodeBatchesArePaddedToBuckets) {
  EXPECT_EQ(DecodeBatchBucket(1, 256), 1);
  EXPECT_EQ(DecodeBatchBucket(3, 256), 4);
  EXPECT_EQ(DecodeBatchBucket(5, 256), 8);
  EXPECT_EQ(DecodeBatchBucket(9, 256), 16);
  EXPECT_EQ(DecodeBatchBucket(250, 256), 256);
  EXPECT_EQ(DecodeBatchBucket(250, 252), 252);  // never past the limit
  EXPECT_EQ(DecodeBatchBucket(3, 2), 3);        // nor below the batch

  BatchLimits limits = Limits();
  limits.pad_decode_batches = true;
  std::vector<TokenId> a = {11}, b = {12}, c = {13};
  std::vector<BlockId> ta = {3, 9}, tb = {1}, tc = {2, 7};
  // Three decodes (positions 5, 2, 6) -> a batch of 4 with one padding sequence.
  auto plan = BatchPlan::Build(std::vector<SeqChunk>{{a, 5, ta, true}, {b, 2, tb, true}, {c, 6, tc, true}}, limits);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->num_seqs, 4);
  EXPECT_EQ(plan->num_tokens, 4);
  EXPECT_EQ(plan->num_padding_seqs, 1);
  EXPECT_EQ(plan->num_logits_rows, 3);
  auto at = [&](size_t offset, size_t count) {
    return std::vector<int32_t>(plan->packed.begin() + offset, plan->packed.begin() + offset + count);
  };
  EXPECT_EQ(at(plan->token_ids_offset, 4), (std::vector<int32_t>{11, 12, 13, 0}));
  EXPECT_EQ(at(plan->positions_offset, 4), (std::vector<int32_t>{5, 2, 6, 0}));
  EXPECT_EQ(at(plan->query_start_offset, 5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(at(plan->context_lens_offset, 4), (std::vector<int32_t>{6, 3, 7, 1}));
  EXPECT_EQ(at(plan->logits_rows_offset, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(plan->slot_mapping, (std::vector<int64_t>{9 * 4 + 1, 1 * 4 + 2, 7 * 4 + 2, -1}));
  const size_t w = plan->table_width;
  std::vector<int32_t> padding_row(w, kInvalidBlock);
  padding_row[0] = 0;  // reads slot 0 of block 0
  EXPECT_EQ(at(plan->block_tables_offset + 3 * w, w), padding_row);
  EXPECT_LE(plan->packed.size(), MaxPackedSize(limits));

  // Prefill steps, and limits off, are never padded.
  std::vector<TokenId> two = {1, 2};
  plan = BatchPlan::Build(std::vector<SeqChunk>{{two, 0, ta, true}, {b, 2, tb, true}, {c, 6, tc, true}}, limits);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_padding_seqs, 0);
  EXPECT_EQ(plan->num_seqs, 3);
  plan = BatchPlan::Build(std::vector<SeqChunk>{{a, 5, ta, true}, {b, 2, tb, true}, {c, 6, tc, true}}, Limits());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->num_seqs, 3);
}

TEST(BatchPlanTest, LastTokenLogitsOnlyAndNoLogits) {
  std::vector<TokenId> a = {1, 2, 3}, b = {4, 5};
  std::vector<BlockId> ta = {0}, tb = {5};
  auto plan = BatchPlan::Build(std::vector<SeqChunk>{{a, 0, ta, false}, {b, 0, tb, true}}, Limits());
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->num_logits_rows, 1);
  EXPECT_EQ(plan->packed[plan->logits_rows_offset], 4);  // b's last token is row 3 + 1
}

TEST(BatchPlanTest, RejectsLimitsAndSharedWrites) {
  std::vector<TokenId> t = {1, 2};
  std::vector<BlockId> shared_prefix_a = {4, 5}, shared_prefix_b = {4, 6};
  // Reading a shared full block is fine; both write different second blocks.
  EXPECT_TRUE(
      BatchPlan::Build(std::vector<SeqChunk>{{t, 4, shared_prefix_a, true}, {t, 4, shared_prefix_b, true}}, Limits())
          .ok());
  // Writing into the same block is not.
  EXPECT_FALSE(
      BatchPlan::Build(std::vector<SeqChunk>{{t, 0, shared_prefix_a, true}, {t, 2, shared_prefix_b, true}}, Limits())
          .ok());
  // One table naming the same block twice in its written range.
  std::vector<TokenId> six(6, 1);
  std::vector<BlockId> dup = {3, 3};
  EXPECT_FALSE(BatchPlan::Build(std::vector<SeqChunk>{{six, 0, dup, true}}, Limits()).ok());
  std::vector<TokenId> many(9, 1);
  std::vector<BlockId> table = {0, 1, 2};
  std::vector<SeqChunk> rows = {{many, 0, table, true, true}};
  EXPECT_FALSE(BatchPlan::Build(rows, Limits()).ok());  // 9 logits rows > 8
  std::vector<SeqChunk> five(5, SeqChunk{t, 0, table, false});
  EXPECT_FALSE(BatchPlan::Build(five, Limits()).ok());  // 5 sequences > 4 (and shared writes)
}

}  // namespace
}  // namespace tandem::runtime
