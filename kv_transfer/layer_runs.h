// The one place that turns a request's block lists into per-layer runs: a run
// is a stretch where both the source and the target block ids are consecutive,
// so one layer of it is one contiguous range on each side (KvLayout is
// layer-major). KvSender posts one write per run; a two-sided KvReceiver posts
// its receives from the runs of its own block list (PairedBlockRuns(dst, dst)).
// Thread rule: pure functions.
#pragma once

#include <span>
#include <vector>

#include "common/base/ids.h"

namespace tandem::kv_transfer {

struct BlockPairRun {
  BlockId src_first = 0;
  BlockId dst_first = 0;
  int num_blocks = 0;

  friend bool operator==(const BlockPairRun&, const BlockPairRun&) = default;
};

// Maximal runs of (src[i], dst[i]) with src[i+1] == src[i] + 1 and
// dst[i+1] == dst[i] + 1, in order. REQUIRES: src.size() == dst.size().
std::vector<BlockPairRun> PairedBlockRuns(std::span<const BlockId> src, std::span<const BlockId> dst);

}  // namespace tandem::kv_transfer
