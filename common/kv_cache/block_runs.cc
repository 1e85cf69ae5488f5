#include "common/kv_cache/block_runs.h"

namespace tandem::kv_cache {

std::vector<BlockRun> BlockRuns(std::span<const BlockId> table) {
  std::vector<BlockRun> runs;
  for (size_t i = 0; i < table.size(); ++i) {
    if (!runs.empty() && table[i] == runs.back().first_block + runs.back().num_blocks) {
      ++runs.back().num_blocks;
    } else {
      runs.push_back({static_cast<int>(i), table[i], 1});
    }
  }
  return runs;
}

std::vector<BlockRunPair> PairedBlockRuns(std::span<const BlockId> src, std::span<const BlockId> dst) {
  std::vector<BlockRunPair> runs;
  for (size_t i = 0; i < src.size() && i < dst.size(); ++i) {
    if (!runs.empty()) {
      BlockRunPair& last = runs.back();
      if (src[i] == last.src_block + last.num_blocks && dst[i] == last.dst_block + last.num_blocks) {
        ++last.num_blocks;
        continue;
      }
    }
    runs.push_back({static_cast<int>(i), src[i], dst[i], 1});
  }
  return runs;
}

}  // namespace tandem::kv_cache
