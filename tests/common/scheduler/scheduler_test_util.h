// Small builders shared by the scheduler tests.
#pragma once

#include <string>
#include <vector>

#include "common/kv_cache/kv_cache_manager.h"
#include "common/scheduler/scheduler.h"

namespace tandem::scheduler::testing {

inline kv_cache::KvCacheConfig SmallKv(int device_blocks, int host_blocks, int block_size = 4) {
  kv_cache::KvCacheConfig kv;
  kv.block_size = block_size;
  kv.num_device_blocks = device_blocks;
  kv.num_host_blocks = host_blocks;
  kv.model_id = "test-model";
  return kv;
}

inline SchedulerConfig SmallConfig(int budget = 64, int max_seqs = 8, int chunk = 32) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_prefill_chunk_tokens = chunk;
  c.max_model_len = 1024;
  return c;
}

// n tokens in [1, 60000), a different run for each seed.
inline std::vector<TokenId> MakeTokens(int n, int seed) {
  std::vector<TokenId> t;
  uint32_t x = 2463534242u + static_cast<uint32_t>(seed) * 7919u;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    t.push_back(static_cast<TokenId>(1 + x % 59999));
  }
  return t;
}

inline SequenceParams Request(RequestId id, std::vector<TokenId> prompt, int max_tokens, std::string salt = "tenant-a",
                              Priority priority = Priority::kInteractive) {
  SequenceParams p;
  p.id = id;
  p.prompt_tokens = std::move(prompt);
  p.max_tokens = max_tokens;
  p.tenant_salt = std::move(salt);
  p.priority = priority;
  return p;
}

}  // namespace tandem::scheduler::testing
