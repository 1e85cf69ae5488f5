// SeqChunk and BatchPlan: the input of one forward step and its host-side
// plan. One SeqChunk per sequence: a prefill chunk of any length or a single
// decode token. BatchPlan validates the chunks against the model and cache
// limits (bad input is InvalidArgument, never a crash) and packs every piece
// of metadata the ops need into one I32 array, uploaded with a single copy.
// Thread rule: plain value types.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::runtime {

struct SeqChunk {
  std::span<const TokenId> tokens{};       // new tokens of this step (non-empty)
  int start_position = 0;                  // position of tokens[0]; the cache holds [0, start_position)
  std::span<const BlockId> block_table{};  // blocks covering at least [0, start_position + tokens.size())
  bool want_logits = false;                // one logits row, for the last token
  bool all_logits = false;                 // with want_logits: a row for every token (prompt logprobs, tests)
};

// Limits of a step, from the model, the KV cache and the runtime options.
struct BatchLimits {
  int vocab_size = 0;
  int block_size = 16;
  int num_blocks = 0;       // blocks in the KV pool
  int max_model_len = 0;    // positions must stay below this
  int max_num_tokens = 0;   // sum of chunk lengths
  int max_num_seqs = 0;     // chunks per step
  int max_logits_rows = 0;  // logits rows per step
  // Decode-only steps (every chunk one token, at most one logits row) get padding
  // sequences up to DecodeBatchBucket, so a CUDA graph captured for a bucket serves every
  // batch size in it. A padding sequence has one token (id 0, position 0) that attends to
  // slot 0 of block 0 (context_len 1; read, never written: its slot mapping is -1) and no
  // logits row; its activations are garbage that no real row reads.
  bool pad_decode_batches = false;
};

// 1, 2, 4, 8, then multiples of 8: the smallest >= `seqs`, at most max(`max_seqs`, seqs).
int DecodeBatchBucket(int seqs, int max_seqs);

// The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^(k-1)) that is >=
// `blocks`, at most `max_width` (the table width of max_model_len). Padding costs at most
// a third more table entries; a context of n blocks has about 2 log2(n) widths.
int TableWidthBucket(int blocks, int max_width);

struct BatchPlan {
  int num_tokens = 0;  // N (padding sequences included)
  int num_seqs = 0;    // S (padding sequences included, after the real ones)
  int num_padding_seqs = 0;
  int num_logits_rows = 0;  // R
  int max_query_len = 0;
  int max_context_len = 0;
  // W: block table row length: the most blocks any sequence uses, rounded up to
  // TableWidthBucket so that steps whose contexts grow by a block keep the same
  // shapes (a CUDA graph captured for one replays for the next ones).
  int table_width = 0;

  // Packed I32 metadata, in this order (the offsets below index into it):
  //   token_ids [N] | positions [N] | query_start [S+1] | context_lens [S] |
  //   block_tables [S, W] (padded with kInvalidBlock) | logits_rows [R]
  std::vector<int32_t> packed;
  size_t token_ids_offset = 0, positions_offset = 0, query_start_offset = 0, context_lens_offset = 0,
         block_tables_offset = 0, logits_rows_offset = 0;
  // I64 [N]: cache slot of each token, block_id * block_size + slot in block.
  std::vector<int64_t> slot_mapping;

  // Validates and plans. Errors name the chunk: empty tokens, negative start,
  // positions past max_model_len, a block table too short or with blocks out
  // of range, a block written twice (two chunks or two table entries), token ids out of range, or a
  // step over the token / sequence / logits-row limits.
  static StatusOr<BatchPlan> Build(std::span<const SeqChunk> chunks, const BatchLimits& limits);
};

// Size of `packed` for a step at the limits (to size the metadata buffer).
// slot_mapping needs max_num_tokens more.
size_t MaxPackedSize(const BatchLimits& limits);

}  // namespace tandem::runtime
