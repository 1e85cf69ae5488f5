#include "common/runtime/batch_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace tandem::runtime {
namespace {

int BlocksFor(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

Status CheckChunk(const SeqChunk& c, size_t index, const BatchLimits& limits) {
  const int64_t n = static_cast<int64_t>(c.tokens.size());
  if (n == 0) return InvalidArgumentError(fmt::format("chunk {}: no tokens", index));
  if (c.start_position < 0) return InvalidArgumentError(fmt::format("chunk {}: negative start position", index));
  const int64_t end = c.start_position + n;
  if (end > limits.max_model_len) {
    return InvalidArgumentError(
        fmt::format("chunk {}: positions up to {} exceed the model length {}", index, end, limits.max_model_len));
  }
  if (static_cast<int64_t>(c.block_table.size()) * limits.block_size < end) {
    return InvalidArgumentError(fmt::format("chunk {}: {} blocks of {} tokens cannot hold {} positions", index,
                                            c.block_table.size(), limits.block_size, end));
  }
  for (int b = 0; b < BlocksFor(static_cast<int>(end), limits.block_size); ++b) {
    if (c.block_table[b] < 0 || c.block_table[b] >= limits.num_blocks) {
      return InvalidArgumentError(
          fmt::format("chunk {}: block id {} out of range [0, {})", index, c.block_table[b], limits.num_blocks));
    }
  }
  for (TokenId t : c.tokens) {
    if (t < 0 || t >= limits.vocab_size) {
      return InvalidArgumentError(
          fmt::format("chunk {}: token id {} out of range [0, {})", index, t, limits.vocab_size));
    }
  }
  return Status::Ok();
}

// A block is written through one table entry of one chunk per step: two
// chunks, or two entries of one table, writing the same block would corrupt it.
Status CheckDisjointWrites(std::span<const SeqChunk> chunks, int block_size) {
  std::unordered_map<BlockId, std::pair<size_t, int>> writer;  // block -> (chunk, table index)
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& c = chunks[i];
    int first = c.start_position / block_size;
    int last = (c.start_position + static_cast<int>(c.tokens.size()) - 1) / block_size;
    for (int b = first; b <= last; ++b) {
      auto [it, inserted] = writer.emplace(c.block_table[b], std::make_pair(i, b));
      if (!inserted && it->second != std::make_pair(i, b)) {
        return InvalidArgumentError(
            fmt::format("block {} is written twice in one step (chunk {} entry {}, chunk {} entry {})",
                        c.block_table[b], it->second.first, it->second.second, i, b));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int TableWidthBucket(int blocks, int max_width) {
  int bucket = 1;
  while (bucket < blocks) {
    // From 2^k (k >= 1) the next bucket is 3 * 2^(k-1), then 2^(k+1).
    const bool power_of_two = (bucket & (bucket - 1)) == 0;
    bucket = power_of_two && bucket >= 2 ? bucket / 2 * 3 : (power_of_two ? 2 : bucket / 3 * 4);
  }
  return std::min(bucket, std::max(max_width, blocks));
}

int DecodeBatchBucket(int seqs, int max_seqs) {
  int bucket = seqs <= 1 ? 1 : seqs <= 2 ? 2 : seqs <= 4 ? 4 : (seqs + 7) / 8 * 8;
  return std::max(seqs, std::min(bucket, max_seqs));
}

size_t MaxPackedSize(const BatchLimits& l) {
  size_t width = static_cast<size_t>(BlocksFor(l.max_model_len, l.block_size));
  return 2 * static_cast<size_t>(l.max_num_tokens) + 2 * static_cast<size_t>(l.max_num_seqs) + 1 +
         static_cast<size_t>(l.max_num_seqs) * width + static_cast<size_t>(l.max_logits_rows);
}

namespace {

// Sizes of the step (counts and maxima) into `plan`, after validating every chunk.
Status Measure(std::span<const SeqChunk> chunks, const BatchLimits& limits, BatchPlan* plan) {
  if (chunks.empty()) return InvalidArgumentError("empty batch");
  if (static_cast<int64_t>(chunks.size()) > limits.max_num_seqs) {
    return InvalidArgumentError(fmt::format("{} sequences in a step, limit {}", chunks.size(), limits.max_num_seqs));
  }
  int64_t tokens = 0, rows = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(CheckChunk(chunks[i], i, limits));
    const auto& c = chunks[i];
    const int n = static_cast<int>(c.tokens.size());
    tokens += n;
    rows += c.want_logits ? (c.all_logits ? n : 1) : 0;
    plan->max_query_len = std::max(plan->max_query_len, n);
    plan->max_context_len = std::max(plan->max_context_len, c.start_position + n);
    plan->table_width = std::max(plan->table_width, BlocksFor(c.start_position + n, limits.block_size));
  }
  plan->table_width = TableWidthBucket(plan->table_width, BlocksFor(limits.max_model_len, limits.block_size));
  if (tokens > limits.max_num_tokens) {
    return InvalidArgumentError(fmt::format("{} tokens in a step, limit {}", tokens, limits.max_num_tokens));
  }
  if (rows > limits.max_logits_rows) {
    return InvalidArgumentError(fmt::format("{} logits rows in a step, limit {}", rows, limits.max_logits_rows));
  }
  TANDEM_RETURN_IF_ERROR(CheckDisjointWrites(chunks, limits.block_size));
  plan->num_seqs = static_cast<int>(chunks.size());
  plan->num_tokens = static_cast<int>(tokens);
  plan->num_logits_rows = static_cast<int>(rows);
  const bool decode_only =
      std::all_of(chunks.begin(), chunks.end(), [](const SeqChunk& c) { return c.tokens.size() == 1; });
  if (limits.pad_decode_batches && decode_only) {
    const int padded = std::min(DecodeBatchBucket(plan->num_seqs, limits.max_num_seqs), limits.max_num_tokens);
    plan->num_padding_seqs = std::max(0, padded - plan->num_seqs);
    plan->num_seqs += plan->num_padding_seqs;
    plan->num_tokens += plan->num_padding_seqs;
  }
  return Status::Ok();
}

// Fills the packed metadata and slot mapping. REQUIRES: Measure succeeded.
void Pack(std::span<const SeqChunk> chunks, int block_size, BatchPlan* plan) {
  const size_t n_tok = plan->num_tokens, n_seq = plan->num_seqs;
  plan->token_ids_offset = 0;
  plan->positions_offset = n_tok;
  plan->query_start_offset = 2 * n_tok;
  plan->context_lens_offset = plan->query_start_offset + n_seq + 1;
  plan->block_tables_offset = plan->context_lens_offset + n_seq;
  plan->logits_rows_offset = plan->block_tables_offset + n_seq * plan->table_width;
  plan->packed.assign(plan->logits_rows_offset + plan->num_logits_rows, kInvalidBlock);
  plan->slot_mapping.resize(n_tok);

  int32_t* p = plan->packed.data();
  int32_t row = 0, logits_row = 0;
  for (size_t s = 0; s < chunks.size(); ++s) {
    const auto& c = chunks[s];
    const int n = static_cast<int>(c.tokens.size());
    p[plan->query_start_offset + s] = row;
    p[plan->context_lens_offset + s] = c.start_position + n;
    std::copy_n(c.block_table.begin(), BlocksFor(c.start_position + n, block_size),
                p + plan->block_tables_offset + s * plan->table_width);
    for (int i = 0; i < n; ++i, ++row) {
      const int pos = c.start_position + i;
      p[plan->token_ids_offset + row] = c.tokens[i];
      p[plan->positions_offset + row] = pos;
      plan->slot_mapping[row] = int64_t{c.block_table[pos / block_size]} * block_size + pos % block_size;
      if (c.want_logits && (c.all_logits || i == n - 1)) p[plan->logits_rows_offset + logits_row++] = row;
    }
  }
  // Padding: token 0 at position 0 attending to slot 0 of block 0 (any readable slot;
  // its slot mapping is -1, so it writes no KV).
  for (size_t s = chunks.size(); s < n_seq; ++s, ++row) {
    p[plan->query_start_offset + s] = row;
    p[plan->context_lens_offset + s] = 1;
    p[plan->block_tables_offset + s * plan->table_width] = 0;
    p[plan->token_ids_offset + row] = 0;
    p[plan->positions_offset + row] = 0;
    plan->slot_mapping[row] = -1;
  }
  p[plan->query_start_offset + n_seq] = row;
}

}  // namespace

StatusOr<BatchPlan> BatchPlan::Build(std::span<const SeqChunk> chunks, const BatchLimits& limits) {
  BatchPlan plan;
  TANDEM_RETURN_IF_ERROR(Measure(chunks, limits, &plan));
  Pack(chunks, limits.block_size, &plan);
  return plan;
}

}  // namespace tandem::runtime
