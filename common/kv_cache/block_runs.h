// Runs of consecutive block ids in a block table. One layer of a run is one
// contiguous region of a tier's pool (KvLayout is layer-major), so a transfer
// or a copy needs one descriptor per run and layer, not one per block.
// Thread rule: pure function.
#pragma once

#include <span>
#include <vector>

#include "common/base/ids.h"

namespace tandem::kv_cache {

struct BlockRun {
  int table_index = 0;  // index in the block table of the run's first block
  BlockId first_block = kInvalidBlock;
  int num_blocks = 0;  // blocks first_block .. first_block + num_blocks - 1

  friend bool operator==(const BlockRun&, const BlockRun&) = default;
};

// Splits `table` into maximal runs where table[i + 1] == table[i] + 1, in order.
std::vector<BlockRun> BlockRuns(std::span<const BlockId> table);

// A run of a copy between two pools: block src_block + k goes to dst_block + k.
struct BlockRunPair {
  int table_index = 0;  // index in both tables of the run's first block
  BlockId src_block = kInvalidBlock;
  BlockId dst_block = kInvalidBlock;
  int num_blocks = 0;

  friend bool operator==(const BlockRunPair&, const BlockRunPair&) = default;
};

// Splits the copy src[i] -> dst[i] into maximal runs where both ids are
// consecutive, in order. REQUIRES: src.size() == dst.size().
std::vector<BlockRunPair> PairedBlockRuns(std::span<const BlockId> src, std::span<const BlockId> dst);

}  // namespace tandem::kv_cache
