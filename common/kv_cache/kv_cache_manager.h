// KvCacheManager: the two KV tiers (device and host) as one cache with prefix
// reuse, for one engine.
//
// - Block tables are plain vectors of block ids owned by the caller (a sequence
//   or a reservation); the manager adds and drops references for them.
// - Prefix reuse: full computed blocks are registered under their BlockHash
//   (CacheBlocks); a new sequence takes references to the longest hashed prefix
//   (AcquirePrefix). A host-tier hit is promoted: a device block is allocated
//   and a host->device copy queued.
// - Device eviction takes the least recently used cached block; with a host
//   tier its content is demoted (device->host copy queued, hash moves to the
//   host tier) before the device block is reused.
// - Swap: a preempted sequence's blocks move to host (SwapOut) and back (SwapIn).
// - Quarantine: device blocks another node may still write (an abandoned
//   reservation) stay out of reuse until a deadline (Quarantine, ReleaseQuarantine).
// Every copy is queued; the engine takes them with TakeCopies() and must run them
// in order before the forward that uses any block of this step.
// Cache events: with config.event_log set, a hash is recorded as stored when it
// becomes present in either tier (CacheBlocks) and as removed when it leaves
// the last tier holding it (eviction, dropping); moves between tiers record
// nothing. DrainCacheEvents() reads them, with a full list after an overflow.
// Thread rule: not thread-safe; owned by the engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/kv_cache/block_hash.h"
#include "common/kv_cache/block_pool.h"
#include "common/kv_cache/cache_event_log.h"
#include "common/kv_cache/kv_tier_storage.h"

namespace tandem::kv_cache {

struct KvCacheConfig {
  // Tokens per block; must equal the KvLayout's block_size.
  int block_size = 16;
  // Blocks in the device tier (GPU memory, or the CPU backend's main buffer).
  int num_device_blocks = 0;
  // Blocks in the host tier (pinned memory); 0 = no host tier, so no demotion
  // and preemption can only recompute.
  int num_host_blocks = 0;
  // Model identity mixed into every block hash (e.g. name + revision).
  std::string model_id;
  // Reuse hashed prefix blocks across requests of the same tenant.
  bool enable_prefix_caching = true;
  // Copy evicted cached device blocks to the host tier instead of dropping them.
  bool demote_to_host = true;
  // Where stored/removed hash events go (not owned; must outlive the manager;
  // engine thread like the manager). nullptr = none recorded.
  CacheEventLog* event_log = nullptr;

  Status Validate() const;
};

// free + referenced + cached + quarantined = total.
struct KvTierCounters {
  int64_t total_blocks = 0;
  int64_t free_blocks = 0;         // neither referenced nor cached
  int64_t referenced_blocks = 0;   // held by sequences, reservations or held KV ("used")
  int64_t cached_blocks = 0;       // unreferenced, hashed, reusable
  int64_t quarantined_blocks = 0;  // out of reuse until a remote writer is surely done (device only)
};

struct KvCacheCounters {
  KvTierCounters device;
  KvTierCounters host;
  int64_t demoted_blocks = 0;      // device cached -> host cached
  int64_t promoted_blocks = 0;     // host hit -> device
  int64_t dropped_blocks = 0;      // cached content evicted from the last tier
  int64_t swapped_out_blocks = 0;  // preemption device -> host
  int64_t swapped_in_blocks = 0;   // resume host -> device
};

class KvCacheManager {
 public:
  // REQUIRES: config.Validate().ok().
  explicit KvCacheManager(KvCacheConfig config);

  const KvCacheConfig& config() const { return config_; }
  int BlocksForTokens(int num_tokens) const;
  // Device blocks that can be handed out now (free + cached).
  int NumAvailableDeviceBlocks() const;
  // Host blocks that can be handed out now (free + cached).
  int NumAvailableHostBlocks() const;

  // How many leading `hashes` are present in the device or the host tier. No side effects.
  int MatchPrefix(std::span<const BlockHash> hashes) const;
  // Appends to the empty device `table` the longest present prefix of `hashes`
  // (at most max_blocks), referencing device hits and promoting host hits.
  // Stops at the first miss or when no device block is left for a promotion.
  // Returns the number of blocks acquired (0 with prefix caching off).
  int AcquirePrefix(std::span<const BlockHash> hashes, int max_blocks, std::vector<BlockId>* table);
  // Grows the device `table` so it covers num_tokens tokens, evicting (and
  // demoting) cached blocks as needed. Returns false and changes nothing when
  // the device tier cannot supply them.
  bool AllocateSlots(int num_tokens, std::vector<BlockId>* table);
  // Registers hashes[i] for table[i], i in [begin, hashes.size()). A block
  // whose hash another block already holds stays unhashed (still correct).
  void CacheBlocks(std::span<const BlockHash> hashes, std::span<const BlockId> table, int begin);
  // Drops one reference to every block of `table` (blocks of `tier`) and clears it.
  void Release(KvTier tier, std::vector<BlockId>* table);

  // Takes over the device blocks of `table` (one reference each) and keeps them
  // out of reuse until `until`: another node may still write them. Clears the table.
  void Quarantine(std::vector<BlockId>* table, Nanos until);
  // Drops the quarantined blocks whose deadline is <= now; they become free.
  void ReleaseQuarantine(Nanos now);
  int NumQuarantined() const { return num_quarantined_; }
  // Every quarantined block, for consistency checks. O(quarantined blocks).
  std::vector<BlockId> QuarantinedBlocks() const;

  // Moves a device table to fresh host blocks (copies queued, device refs
  // dropped). Returns false and changes nothing when the host tier is too small.
  bool SwapOut(std::vector<BlockId>* table);
  // Moves a host table back to fresh device blocks. False (no change) if the device is full.
  bool SwapIn(std::vector<BlockId>* table);

  // The copies queued since the last call, in the order they must run.
  std::vector<BlockCopy> TakeCopies();
  KvCacheCounters Counters() const;
  // Every hash present in the device or the host tier, each once (what
  // MatchPrefix can find). O(cached blocks).
  std::vector<BlockHash> CachedHashes() const;
  const BlockPool& pool(KvTier tier) const { return tier == KvTier::kDevice ? device_ : host_; }

 private:
  // n device blocks appended to `out` (hint: last block of the table), evicting first.
  bool AllocateDevice(int n, BlockId hint, std::vector<BlockId>* out);
  // Moves a just-evicted device block's content to the host tier, if it has room.
  void Demote(BlockId device_block, const BlockHash& hash);
  // Makes the host tier have n free blocks by dropping cached ones. REQUIRES enough available.
  void MakeHostFree(int n);
  // Event log hooks (no-ops without config.event_log).
  void NoteStored(const BlockHash& hash);
  void NoteRemoved(const BlockHash& hash);

  struct QuarantineEntry {
    Nanos until = 0;
    std::vector<BlockId> blocks;
  };

  KvCacheConfig config_;
  BlockPool device_;
  BlockPool host_;
  std::vector<BlockCopy> copies_;
  std::vector<QuarantineEntry> quarantine_;
  int num_quarantined_ = 0;
  KvCacheCounters stats_;
};

// The events `log` holds for `kv` (the log its config.event_log names): the
// coalesced changes, or after an overflow {reset = true, stored = CachedHashes()}.
CacheEvents DrainCacheEvents(CacheEventLog& log, const KvCacheManager& kv);

}  // namespace tandem::kv_cache
