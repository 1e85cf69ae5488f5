// A randomly filled paged KV cache (one layer) with shuffled block tables, for the
// attention tests. Slots that no sequence owns hold NaN, so reading them fails the test.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/kv_cache/kv_layout.h"
#include "tests/common/kernels/gpu_test_util.h"

namespace tandem::testing {

struct PagedKv {
  kv_cache::KvLayout layout;
  std::vector<uint16_t> pool;         // [num_blocks, 2, Hkv, bs, hd] bf16 bits
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq]
  int max_blocks_per_seq = 0;

  float K(int seq, int head, int t, int d) const { return At(seq, 0, head, t, d); }
  float V(int seq, int head, int t, int d) const { return At(seq, 1, head, t, d); }
  float At(int seq, int kv, int head, int t, int d) const {
    const int blk = block_tables[seq * max_blocks_per_seq + t / layout.block_size];
    return BF16ToF32(pool[layout.ElementOffset(0, blk, kv, head, t % layout.block_size) + d]);
  }
};

inline PagedKv MakePagedKv(const std::vector<int>& context_lens, int num_kv_heads, int head_dim, int block_size,
                           std::mt19937& rng) {
  PagedKv kv;
  int max_len = 1, total_blocks = 0;
  for (int len : context_lens) {
    max_len = std::max(max_len, len);
    total_blocks += (len + block_size - 1) / block_size;
  }
  kv.max_blocks_per_seq = (max_len + block_size - 1) / block_size;
  kv.layout = kv_cache::KvLayout{.num_layers = 1,
                                 .num_kv_heads = num_kv_heads,
                                 .head_dim = head_dim,
                                 .block_size = block_size,
                                 .num_blocks = total_blocks + 3};
  kv.pool.assign(kv.layout.TotalBytes() / 2, 0x7fc0);  // NaN
  std::vector<int32_t> ids(kv.layout.num_blocks);
  for (int i = 0; i < kv.layout.num_blocks; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  kv.block_tables.assign(context_lens.size() * kv.max_blocks_per_seq, -1);
  std::normal_distribution<float> dist(0.f, 1.f);
  int next = 0;
  for (size_t s = 0; s < context_lens.size(); ++s) {
    for (int b = 0; b * block_size < context_lens[s]; ++b) {
      const int blk = ids[next++];
      kv.block_tables[s * kv.max_blocks_per_seq + b] = blk;
      for (int kvi = 0; kvi < 2; ++kvi)
        for (int h = 0; h < num_kv_heads; ++h)
          for (int slot = 0; slot < block_size && b * block_size + slot < context_lens[s]; ++slot)
            for (int d = 0; d < head_dim; ++d)
              kv.pool[kv.layout.ElementOffset(0, blk, kvi, h, slot) + d] = F32ToBF16(dist(rng));
    }
  }
  // Unused table entries point at a real (NaN-filled) block, never at -1.
  for (auto& b : kv.block_tables)
    if (b < 0) b = ids[next];
  return kv;
}

// softmax(q·K^T * scale) · V over keys [0, num_keys) of one sequence and KV head, in double.
inline void RefAttentionRow(const PagedKv& kv, int seq, int kv_head, const float* q, int num_keys, float scale,
                            float* out) {
  const int hd = kv.layout.head_dim;
  std::vector<double> s(num_keys);
  double mx = -INFINITY;
  for (int t = 0; t < num_keys; ++t) {
    double acc = 0;
    for (int d = 0; d < hd; ++d) acc += static_cast<double>(q[d]) * kv.K(seq, kv_head, t, d);
    s[t] = acc * scale;
    mx = std::max(mx, s[t]);
  }
  double z = 0;
  for (auto& x : s) z += (x = std::exp(x - mx));
  for (int d = 0; d < hd; ++d) {
    double acc = 0;
    for (int t = 0; t < num_keys; ++t) acc += s[t] * kv.V(seq, kv_head, t, d);
    out[d] = num_keys > 0 ? static_cast<float>(acc / z) : 0.f;
  }
}

}  // namespace tandem::testing
