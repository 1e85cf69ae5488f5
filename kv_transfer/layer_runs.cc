#include "kv_transfer/layer_runs.h"

#include "common/base/check.h"

namespace tandem::kv_transfer {

std::vector<BlockPairRun> PairedBlockRuns(std::span<const BlockId> src, std::span<const BlockId> dst) {
  TANDEM_CHECK(src.size() == dst.size());
  std::vector<BlockPairRun> runs;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!runs.empty()) {
      BlockPairRun& r = runs.back();
      if (src[i] == r.src_first + r.num_blocks && dst[i] == r.dst_first + r.num_blocks) {
        ++r.num_blocks;
        continue;
      }
    }
    runs.push_back(BlockPairRun{src[i], dst[i], 1});
  }
  return runs;
}

}  // namespace tandem::kv_transfer
