// HostBlockArena: a host buffer laid out as a KvLayout pool (layer-major,
// `layout.num_blocks` blocks) with its own free list: decode's landing arena
// and prefill's staging arena. Registered once with the KV transport by the
// role. Blocks freed after a failed transfer can be quarantined for a grace
// period (one-sided late writes may still land in them).
//
// Thread rule: thread-safe (one mutex); Block() pointers are stable for the
// arena's lifetime.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/ids.h"
#include "common/kv_cache/kv_layout.h"

namespace tandem::node {

class HostBlockArena {
 public:
  // REQUIRES: layout.Validate() OK. Allocates layout.TotalBytes() (64-byte aligned, zeroed).
  HostBlockArena(const kv_cache::KvLayout& layout, const Clock& clock = Clock::Real());

  const kv_cache::KvLayout& layout() const { return layout_; }
  std::byte* base() { return memory_.get(); }
  size_t size_bytes() const { return layout_.TotalBytes(); }
  // Start of (layer, block); layout_.BytesPerBlockLayer() bytes.
  std::byte* Block(int layer, BlockId block) { return memory_.get() + layout_.BlockOffset(layer, block); }

  // n blocks, or nullopt when fewer are free now (quarantined blocks whose grace passed count as free).
  std::optional<std::vector<BlockId>> Allocate(int n);
  void Free(const std::vector<BlockId>& blocks);
  // Frees the blocks after grace_ms.
  void Quarantine(const std::vector<BlockId>& blocks, int64_t grace_ms);
  // Blocks allocated (in use or quarantined).
  int num_in_use() const;
  int num_quarantined() const;

 private:
  void ReclaimLocked();

  struct Deleter {
    void operator()(std::byte* p) const;
  };
  kv_cache::KvLayout layout_;
  const Clock& clock_;
  std::unique_ptr<std::byte, Deleter> memory_;
  mutable std::mutex mu_;  // guards free_, quarantine_
  std::vector<BlockId> free_;
  std::deque<std::pair<Nanos, std::vector<BlockId>>> quarantine_;
};

}  // namespace tandem::node
