#include "common/node/host_block_arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/base/check.h"

namespace tandem::node {

void HostBlockArena::Deleter::operator()(std::byte* p) const { std::free(p); }

HostBlockArena::HostBlockArena(const kv_cache::KvLayout& layout, const Clock& clock) : layout_(layout), clock_(clock) {
  TANDEM_CHECK(layout_.Validate().ok()) << layout_.DebugString();
  size_t bytes = (layout_.TotalBytes() + 63) / 64 * 64;
  memory_.reset(static_cast<std::byte*>(std::aligned_alloc(64, bytes)));
  TANDEM_CHECK(memory_ != nullptr) << "host arena of " << bytes << " bytes";
  std::memset(memory_.get(), 0, bytes);
  free_.reserve(layout_.num_blocks);
  for (BlockId b = layout_.num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void HostBlockArena::ReclaimLocked() {
  Nanos now = clock_.NowNanos();
  while (!quarantine_.empty() && quarantine_.front().first <= now) {
    for (BlockId b : quarantine_.front().second) free_.push_back(b);
    quarantine_.pop_front();
  }
}

std::optional<std::vector<BlockId>> HostBlockArena::Allocate(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  ReclaimLocked();
  if (n < 0 || static_cast<size_t>(n) > free_.size()) return std::nullopt;
  std::vector<BlockId> out(free_.end() - n, free_.end());
  free_.resize(free_.size() - n);
  std::reverse(out.begin(), out.end());  // ascending ids: contiguous runs where possible
  return out;
}

void HostBlockArena::Free(const std::vector<BlockId>& blocks) {
  std::lock_guard<std::mutex> lock(mu_);
  for (BlockId b : blocks) {
    TANDEM_CHECK(b >= 0 && b < layout_.num_blocks) << "bad arena block " << b;
    free_.push_back(b);
  }
}

void HostBlockArena::Quarantine(const std::vector<BlockId>& blocks, int64_t grace_ms) {
  if (blocks.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  // Deadlines are pushed in call order with one grace, so the deque stays sorted
  // for equal grace values; a shorter grace only waits for the ones before it.
  quarantine_.emplace_back(clock_.NowNanos() + MsToNanos(grace_ms), blocks);
}

int HostBlockArena::num_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  const_cast<HostBlockArena*>(this)->ReclaimLocked();
  return layout_.num_blocks - static_cast<int>(free_.size());
}

int HostBlockArena::num_quarantined() const {
  std::lock_guard<std::mutex> lock(mu_);
  const_cast<HostBlockArena*>(this)->ReclaimLocked();
  int n = 0;
  for (const auto& q : quarantine_) n += static_cast<int>(q.second.size());
  return n;
}

}  // namespace tandem::node
