// KvLayout <-> KvLayoutInfo (the layout as carried in RegisterRequest and the
// transfer handshake). Thread rule: free functions, thread-safe.
#pragma once

#include "common/base/status.h"
#include "common/kv_cache/kv_layout.h"
#include "common/proto/control.pb.h"

namespace tandem::proto {

// Every field but num_blocks (which differs between nodes).
KvLayoutInfo ToKvLayoutInfo(const kv_cache::KvLayout& layout);

// Back to a KvLayout with num_blocks = 0. InvalidArgument for a layout version
// other than kKvLayoutVersion, an unknown dtype, or sizes KvLayout::Validate refuses.
StatusOr<kv_cache::KvLayout> FromKvLayoutInfo(const KvLayoutInfo& info);

}  // namespace tandem::proto
