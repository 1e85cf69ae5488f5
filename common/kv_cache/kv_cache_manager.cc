#include "common/kv_cache/kv_cache_manager.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/base/check.h"

namespace tandem::kv_cache {

Status KvCacheConfig::Validate() const {
  if (block_size <= 0 || (block_size & (block_size - 1)) != 0) {
    return InvalidArgumentError(fmt::format("kv cache: block_size must be a power of two, got {}", block_size));
  }
  if (num_device_blocks <= 0) {
    return InvalidArgumentError(fmt::format("kv cache: num_device_blocks must be > 0, got {}", num_device_blocks));
  }
  if (num_host_blocks < 0) {
    return InvalidArgumentError(fmt::format("kv cache: num_host_blocks must be >= 0, got {}", num_host_blocks));
  }
  return Status::Ok();
}

KvCacheManager::KvCacheManager(KvCacheConfig config)
    : config_(std::move(config)), device_(config_.num_device_blocks), host_(config_.num_host_blocks) {
  TANDEM_CHECK_OK(config_.Validate());
}

int KvCacheManager::BlocksForTokens(int num_tokens) const {
  return (num_tokens + config_.block_size - 1) / config_.block_size;
}

int KvCacheManager::NumAvailableDeviceBlocks() const { return device_.NumFree() + device_.NumCached(); }
int KvCacheManager::NumAvailableHostBlocks() const { return host_.NumFree() + host_.NumCached(); }

int KvCacheManager::MatchPrefix(std::span<const BlockHash> hashes) const {
  if (!config_.enable_prefix_caching) return 0;
  int n = 0;
  for (const BlockHash& h : hashes) {
    if (!device_.Lookup(h) && !host_.Lookup(h)) break;
    ++n;
  }
  return n;
}

int KvCacheManager::AcquirePrefix(std::span<const BlockHash> hashes, int max_blocks, std::vector<BlockId>* table) {
  TANDEM_CHECK(table->empty()) << "AcquirePrefix needs an empty table";
  if (!config_.enable_prefix_caching) return 0;
  const int limit = std::min<int>(max_blocks, static_cast<int>(hashes.size()));
  for (int i = 0; i < limit; ++i) {
    if (auto d = device_.Lookup(hashes[i])) {
      device_.Ref(*d);
      table->push_back(*d);
      continue;
    }
    auto h = host_.Lookup(hashes[i]);
    if (!h) break;
    // Promote. Allocation may evict device blocks (never ours: they are referenced)
    // and may drop this very host block while demoting; look it up again after.
    BlockId hint = table->empty() ? kInvalidBlock : table->back();
    std::vector<BlockId> got;
    if (!AllocateDevice(1, hint, &got)) break;
    h = host_.Lookup(hashes[i]);
    if (!h) {
      device_.Unref(got[0]);
      break;
    }
    copies_.push_back({KvTier::kHost, *h, KvTier::kDevice, got[0]});
    TANDEM_CHECK(device_.SetHash(got[0], hashes[i])) << "promoted hash already on device";
    ++stats_.promoted_blocks;
    table->push_back(got[0]);
  }
  return static_cast<int>(table->size());
}

bool KvCacheManager::AllocateDevice(int n, BlockId hint, std::vector<BlockId>* out) {
  if (n > NumAvailableDeviceBlocks()) return false;
  while (device_.NumFree() < n) {
    auto evicted = device_.EvictLru();
    TANDEM_CHECK(evicted.has_value()) << "device available count out of sync";
    Demote(evicted->first, evicted->second);
    if (!host_.Lookup(evicted->second)) NoteRemoved(evicted->second);
  }
  TANDEM_CHECK(device_.AllocateFree(n, hint, out));
  return true;
}

void KvCacheManager::Demote(BlockId device_block, const BlockHash& hash) {
  if (!config_.demote_to_host || host_.num_blocks() == 0 || NumAvailableHostBlocks() == 0) {
    ++stats_.dropped_blocks;
    return;
  }
  if (host_.Lookup(hash)) return;  // the host tier already holds this content
  MakeHostFree(1);
  std::vector<BlockId> got;
  TANDEM_CHECK(host_.AllocateFree(1, kInvalidBlock, &got));
  copies_.push_back({KvTier::kDevice, device_block, KvTier::kHost, got[0]});
  TANDEM_CHECK(host_.SetHash(got[0], hash));
  host_.Unref(got[0]);  // now cached in the host tier
  ++stats_.demoted_blocks;
}

void KvCacheManager::MakeHostFree(int n) {
  while (host_.NumFree() < n) {
    auto evicted = host_.EvictLru();
    TANDEM_CHECK(evicted.has_value()) << "host available count out of sync";
    ++stats_.dropped_blocks;
    if (!device_.Lookup(evicted->second)) NoteRemoved(evicted->second);
  }
}

bool KvCacheManager::AllocateSlots(int num_tokens, std::vector<BlockId>* table) {
  int need = BlocksForTokens(num_tokens) - static_cast<int>(table->size());
  if (need <= 0) return true;
  return AllocateDevice(need, table->empty() ? kInvalidBlock : table->back(), table);
}

void KvCacheManager::CacheBlocks(std::span<const BlockHash> hashes, std::span<const BlockId> table, int begin) {
  if (!config_.enable_prefix_caching) return;
  TANDEM_CHECK_LE(hashes.size(), table.size());
  for (size_t i = static_cast<size_t>(begin); i < hashes.size(); ++i) {
    // false: content already cached elsewhere. A hash only the host tier held was present already.
    if (device_.SetHash(table[i], hashes[i]) && !host_.Lookup(hashes[i])) NoteStored(hashes[i]);
  }
}

void KvCacheManager::Release(KvTier tier, std::vector<BlockId>* table) {
  BlockPool& pool = tier == KvTier::kDevice ? device_ : host_;
  for (BlockId b : *table) pool.Unref(b);
  table->clear();
}

void KvCacheManager::Quarantine(std::vector<BlockId>* table, Nanos until) {
  if (table->empty()) return;
  num_quarantined_ += static_cast<int>(table->size());
  quarantine_.push_back({until, std::move(*table)});
  table->clear();
}

void KvCacheManager::ReleaseQuarantine(Nanos now) {
  auto due = [now](const QuarantineEntry& e) { return e.until <= now; };
  for (QuarantineEntry& e : quarantine_) {
    if (!due(e)) continue;
    num_quarantined_ -= static_cast<int>(e.blocks.size());
    Release(KvTier::kDevice, &e.blocks);
  }
  std::erase_if(quarantine_, due);
}

std::vector<BlockId> KvCacheManager::QuarantinedBlocks() const {
  std::vector<BlockId> out;
  out.reserve(static_cast<size_t>(num_quarantined_));
  for (const QuarantineEntry& e : quarantine_) out.insert(out.end(), e.blocks.begin(), e.blocks.end());
  return out;
}

bool KvCacheManager::SwapOut(std::vector<BlockId>* table) {
  const int n = static_cast<int>(table->size());
  if (n > NumAvailableHostBlocks()) return false;
  MakeHostFree(n);
  std::vector<BlockId> host_blocks;
  host_blocks.reserve(table->size());
  TANDEM_CHECK(host_.AllocateFree(n, kInvalidBlock, &host_blocks));
  for (int i = 0; i < n; ++i) {
    copies_.push_back({KvTier::kDevice, (*table)[i], KvTier::kHost, host_blocks[i]});
  }
  Release(KvTier::kDevice, table);
  *table = std::move(host_blocks);
  stats_.swapped_out_blocks += n;
  return true;
}

bool KvCacheManager::SwapIn(std::vector<BlockId>* table) {
  const int n = static_cast<int>(table->size());
  std::vector<BlockId> device_blocks;
  device_blocks.reserve(table->size());
  if (!AllocateDevice(n, kInvalidBlock, &device_blocks)) return false;
  for (int i = 0; i < n; ++i) {
    copies_.push_back({KvTier::kHost, (*table)[i], KvTier::kDevice, device_blocks[i]});
  }
  Release(KvTier::kHost, table);
  *table = std::move(device_blocks);
  stats_.swapped_in_blocks += n;
  return true;
}

std::vector<BlockCopy> KvCacheManager::TakeCopies() {
  std::vector<BlockCopy> out;
  out.swap(copies_);
  return out;
}

KvCacheCounters KvCacheManager::Counters() const {
  KvCacheCounters c = stats_;
  auto fill = [](const BlockPool& p, KvTierCounters* t) {
    t->total_blocks = p.num_blocks();
    t->free_blocks = p.NumFree();
    t->referenced_blocks = p.NumReferenced();
    t->cached_blocks = p.NumCached();
  };
  fill(device_, &c.device);
  fill(host_, &c.host);
  c.device.referenced_blocks -= num_quarantined_;
  c.device.quarantined_blocks = num_quarantined_;
  return c;
}

std::vector<BlockHash> KvCacheManager::CachedHashes() const {
  std::vector<BlockHash> out;
  out.reserve(static_cast<size_t>(device_.NumCached() + device_.NumReferenced() + host_.NumCached()));
  device_.AppendHashes(&out);
  const size_t on_device = out.size();
  host_.AppendHashes(&out);
  // Drop host copies of hashes the device also holds (promoted blocks keep their host copy).
  size_t kept = on_device;
  for (size_t i = on_device; i < out.size(); ++i) {
    if (!device_.Lookup(out[i])) out[kept++] = out[i];
  }
  out.resize(kept);
  return out;
}

void KvCacheManager::NoteStored(const BlockHash& hash) {
  if (config_.event_log != nullptr) config_.event_log->RecordStored(hash);
}

void KvCacheManager::NoteRemoved(const BlockHash& hash) {
  if (config_.event_log != nullptr) config_.event_log->RecordRemoved(hash);
}

CacheEvents DrainCacheEvents(CacheEventLog& log, const KvCacheManager& kv) {
  CacheEvents events = log.Take();
  if (events.reset) events.stored = kv.CachedHashes();
  return events;
}

}  // namespace tandem::kv_cache
