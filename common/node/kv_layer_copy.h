// Copies of one layer of KV blocks between a backend's pool and a host block
// arena, one copy per run of consecutive ids on both sides (PairedBlockRuns):
// a prefill node stages a layer for a host-only transport, a decode node
// uploads a landed layer into its reserved blocks.
// Thread rule: as the queue's (HostCopyQueue).
#pragma once

#include <cstddef>
#include <span>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/kv_cache/kv_layout.h"
#include "common/runtime/backend.h"

namespace tandem::node {

// One side of a layer copy: a layer-major pool (`base` + `layout`) and its block ids.
struct KvPoolSide {
  std::byte* base = nullptr;
  const kv_cache::KvLayout* layout = nullptr;
  std::span<const BlockId> blocks;
};

// Queues layer `layer` of pool.blocks[i] (device) -> host.blocks[i].
Status EnqueueLayerToHost(runtime::HostCopyQueue& queue, runtime::Device device, const KvPoolSide& pool,
                          const KvPoolSide& host, int layer);
// Queues layer `layer` of host.blocks[i] -> pool.blocks[i] (device).
Status EnqueueLayerToDevice(runtime::HostCopyQueue& queue, runtime::Device device, const KvPoolSide& host,
                            const KvPoolSide& pool, int layer);

}  // namespace tandem::node
