#include "common/kernels/decode_step.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/cuda/cuda_status.h"
#include "common/kernels/decode_attention_impl.cuh"
#include "common/kernels/kernel_util.cuh"
#include "common/kernels/mma_util.cuh"
#include "common/kernels/rope_util.cuh"

namespace tandem::kernels {
namespace {

using detail::Bf16x8ToFloat;
using detail::FloatToBf16x8;
using detail::WarpSum;

constexpr int kMaxSeqs = kDecodeStepMaxSeqs;
constexpr int kMaxGroup = kDecodeStepMaxGroup;
constexpr int kConsumerWarps = 8;
constexpr int kConsumers = 32 * kConsumerWarps;
// Producer warps: one lane issues the weight stages (tensor boxes); all four copy K/V
// stages with 16-byte cp.async, which one warp alone streams at ~0.6 of a plain streaming
// read per block and four at 1.05 (bench/kernels/ring_stream_bench, H200). Twelve warps
// cost no registers over nine (warps get registers in fours).
constexpr int kProducerWarps = 4;
constexpr int kThreads = kConsumers + 32 * kProducerWarps;

// Weight stages: 16 rows (one mma tile) x kChunk columns, copied by the bulk tensor engine
// as 4 boxes of 8 rows x 256 columns (copies under 2 KB stream well below HBM speed). KV
// stages: K of KvTokensPerStage(head_dim) tokens, then their V, rows padded to head_dim + 8
// elements as the decode attention kernel's tiles (its tensor-core step, ComputeTile,
// runs on them).
constexpr int kChunk = 512;
constexpr int kStepK = 32;  // k of one mma step (two m16n8k16 on a k permutation, see MmaStep)
constexpr int kStepsPerChunk = kChunk / kStepK;
constexpr int kBoxCols = 256;                   // tensor boxes: 8 rows x 256 columns
constexpr int kBoxBytes = 8 * kBoxCols * 2;
constexpr int kStageBytes = 16 * (kChunk * 2 + 64);  // a weight stage (16 x kChunk, 16 KB) or a K/V stage
static_assert(4 * kBoxBytes <= kStageBytes, "a weight stage fits a ring slot");
constexpr int kStages = 11;
static_assert(kStepsPerChunk == 2 * kConsumerWarps, "each consumer warp takes two steps of a chunk");

__host__ __device__ constexpr int KvRow(int head_dim) { return head_dim + 8; }
// Tokens of a KV stage: whole 16-token blocks of K and V rows that fit a ring slot (32 at
// head_dim 128, 48 at 64).
__host__ __device__ constexpr int KvTokensPerStage(int head_dim) {
  return kStageBytes / (2 * KvRow(head_dim) * 2) / 16 * 16;
}

// Row tiles whose accumulators a consumer warp keeps at once: a GEMV runs tile groups
// chunk-major, so each chunk of x is loaded once per group.
constexpr int kGroupTiles = 8;
constexpr int kXBufs = 3;  // x chunks in shared memory: the one in use and two ahead
constexpr int kXPitch = kChunk * 2 + 64;
constexpr int kXBufBytes = kMaxSeqs * kXPitch;
// Scratch: x chunks during a GEMV, then the warps' partial tiles; during attention the
// newest token's K/V tile, then the warps' partial outputs.
constexpr int kScratchBytes = 32768;
static_assert(kXBufs * kXBufBytes <= kScratchBytes, "x chunks fit the scratch");
static_assert(kGroupTiles * kConsumerWarps * 32 * 16 <= kScratchBytes, "partial tiles fit the scratch");
static_assert(kConsumerWarps * kMaxGroup * 128 * 4 <= kScratchBytes, "attention partials fit the scratch");
static_assert(2 * 16 * KvRow(128) * 2 <= kScratchBytes, "the newest token's tile fits the scratch");

struct SmemLayout {
  static constexpr int kRing = 0;
  static constexpr int kScratch = kRing + kStages * kStageBytes;
  static constexpr int kQ = kScratch + kScratchBytes;               // bf16 [16][KvRow(hd)]: q as an mma tile
  static constexpr int kWarpMl = kQ + 16 * KvRow(128) * 2;           // fp32 [2][warps][kMaxGroup]
  static constexpr int kInvRms = kWarpMl + 2 * kConsumerWarps * kMaxGroup * 4;  // fp32 [kMaxSeqs]
  static constexpr int kFlag = kInvRms + kMaxSeqs * 4;              // int: this block merges the splits
  static constexpr int kBars = kFlag + 16;                           // u64 full[kStages], empty[kStages]
  static constexpr int kBytes = kBars + 2 * kStages * 8;
};
static_assert(SmemLayout::kBars % 8 == 0, "mbarriers are 8-byte aligned");
static_assert(SmemLayout::kBytes <= 227 * 1024, "fits an H100/H200 block");

// ---------------------------------------------------------------------------------------
// Synchronization primitives.

constexpr uint64_t kHangNs = 10ull * 1000 * 1000 * 1000;

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Counts spins; traps (failing the stream) once a wait has lasted kHangNs: only a bug can
// make a barrier wait that long, and a trap is better than a hung GPU.
struct Watchdog {
  uint64_t start = 0;
  uint32_t spins = 0;
  __device__ __forceinline__ void Tick() {
    if ((++spins & 0x3ff) != 0) return;
    const uint64_t now = GlobalTimerNs();
    if (start == 0) {
      start = now;
    } else if (now - start > kHangNs) {
      __trap();
    }
  }
};

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void MbarInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void MbarArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SmemAddr(bar)) : "memory");
}

// Waits for the completion of the barrier's phase of parity `parity` (the phase before
// the current one counts as complete, so a first wait on parity 1 passes). (A suspend-time
// hint on try_wait, so that waiters sleep instead of spinning, measured no different.)
__device__ __forceinline__ void MbarWait(uint64_t* bar, uint32_t parity) {
  Watchdog dog;
  for (;;) {
    uint32_t done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(SmemAddr(bar)), "r"(parity)
        : "memory");
    if (done) return;
    dog.Tick();
  }
}

// A box of the tensor map at `map` (global memory) at (column, row) into shared memory,
// completing its bytes on `bar`.
__device__ __forceinline__ void TensorBox(void* smem, const void* map, int col, int row, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          SmemAddr(smem)),
      "l"(map), "r"(col), "r"(row), "r"(SmemAddr(bar))
      : "memory");
}

__device__ __forceinline__ void MbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)), "r"(bytes) : "memory");
}

// Arrives on `bar` once this thread's cp.async copies issued so far have landed (the
// barrier counts this arrival in its expected count).
__device__ __forceinline__ void CpAsyncArriveNoinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(SmemAddr(bar)) : "memory");
}

// Barrier of the 8 consumer warps (named barrier 1; the producer warp never takes part).
__device__ __forceinline__ void ConsumerSync() { asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory"); }

// Loads of data other blocks wrote in this launch: from L2 (.cg), never a stale L1 line.
__device__ __forceinline__ float LoadCg(const float* p) { return __ldcg(p); }
__device__ __forceinline__ float4 LoadCg(const float4* p) { return __ldcg(p); }

__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Grid-wide barrier of the consumers over counter `ctr` (each used once per launch): every
// consumer's writes before it are visible to every consumer after it.
// `trace`, when set, gets the arrival and release times.
__device__ __forceinline__ void GridSync(uint32_t* ctr, int num_blocks, int64_t* trace) {
  ConsumerSync();
  if (threadIdx.x == 0) {
    if (trace != nullptr) trace[0] = static_cast<int64_t>(GlobalTimerNs());
    __threadfence();
    atomicAdd(ctr, 1u);
    Watchdog dog;
    while (LoadAcquire(ctr) < static_cast<uint32_t>(num_blocks)) dog.Tick();
    __threadfence();
    if (trace != nullptr) trace[1] = static_cast<int64_t>(GlobalTimerNs());
  }
  ConsumerSync();
}

__device__ __forceinline__ int64_t* BlockTrace(const DecodeStepParams& p) {
  return p.trace == nullptr ? nullptr
                            : p.trace + static_cast<int64_t>(blockIdx.x) * DecodeStepTraceStride(p.num_layers);
}

// ---------------------------------------------------------------------------------------
// The schedule: which rows, items and stages each block has. The producer and the
// consumers derive the same sequence of stages from these functions.

struct Range {
  int begin, count;
};

// Block b's share of `units` split evenly over g blocks; `rot` moves the extra units of an
// uneven split to other blocks in each phase.
__device__ __forceinline__ Range Share(int units, int b, int g, int rot) {
  const int r = (b + rot) % g;
  const int base = units / g, rem = units % g;
  return {r * base + min(r, rem), base + (r < rem ? 1 : 0)};
}

enum Matrix : int { kQkv = 0, kO = 1, kGateUp = 2, kDown = 3, kLmHead = 4 };

// A matrix-vector phase of one block: rows w[units] (or, `paired`, features: gate rows f
// and up rows f + pair_offset), k columns; its weights come through tensor map `map`.
// Shares are whole 8-row units (the tensor boxes' height), so a box holds no other
// block's rows; rows past the matrix are zero-filled by the copy engine.
struct Gemv {
  const __nv_bfloat16* w;
  int k;
  bool paired;
  int pair_offset;
  Range units;
  int map;
  __device__ int UnitsPerTile() const { return paired ? 8 : 16; }
  __device__ int NumTiles() const { return (units.count + UnitsPerTile() - 1) / UnitsPerTile(); }
  __device__ int NumChunks() const { return (k + kChunk - 1) / kChunk; }
  // Tile t: mma rows 0..7 are weight rows lo.., rows 8..15 weight rows hi...
  __device__ void Tile(int t, int& lo, int& n_lo, int& hi, int& n_hi) const {
    const int left = units.count - t * UnitsPerTile();
    if (paired) {
      lo = units.begin + 8 * t;
      hi = lo + pair_offset;
      n_lo = n_hi = min(8, left);
    } else {
      lo = units.begin + 16 * t;
      hi = lo + 8;
      n_lo = min(8, left);
      n_hi = max(0, min(8, left - 8));
    }
  }
};

__device__ __forceinline__ int QkvRows(const DecodeStepParams& p) {
  return (p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim;
}

// Block b's rows of a matrix of `rows` rows, in whole 8-row units.
__device__ __forceinline__ Range RowShare(int rows, int b, int g, int rot) {
  const Range u = Share((rows + 7) / 8, b, g, rot);
  const int begin = 8 * u.begin;
  return {begin, max(0, min(rows, 8 * (u.begin + u.count)) - begin)};
}

__device__ Gemv MakeGemv(const DecodeStepParams& p, int layer, Matrix mat, int block) {
  const int g = p.num_blocks;
  const int rot = (layer * 5 + static_cast<int>(mat)) * 17;
  const int map = 4 * layer + static_cast<int>(mat);
  const DecodeStepLayer& L = p.layers[layer < p.num_layers ? layer : 0];
  switch (mat) {
    case kQkv: return {L.qkv, p.hidden, false, 0, RowShare(QkvRows(p), block, g, rot), map};
    case kO: return {L.o, p.num_q_heads * p.head_dim, false, 0, RowShare(p.hidden, block, g, rot), map};
    case kGateUp: return {L.gate_up, p.hidden, true, p.ffn, RowShare(p.ffn, block, g, rot), map};
    case kDown: return {L.down, p.ffn, false, 0, RowShare(p.hidden, block, g, rot), map};
    case kLmHead: break;
  }
  return {p.lm_head, p.hidden, false, 0, RowShare(p.vocab, block, g, rot), 4 * p.num_layers};
}

// Attention items: (sequence, KV head, split), block b takes items b, b + g, ...; each
// split is a range of tokens_per_split positions, streamed in KV stages of kv_tokens
// (all but the sequence's newest position, which the consumers make from the QKV row).
struct AttnItem {
  int seq, kvh, split;
  int begin, end;  // positions of the split, clipped to the context
  int newest;      // context - 1
  __device__ int StreamEnd() const { return min(end, newest); }
  __device__ int NumStages(int kv_tokens) const {
    const int n = StreamEnd() - begin;
    return n > 0 ? (n + kv_tokens - 1) / kv_tokens : 0;
  }
  __device__ bool HasNewest() const { return newest >= begin && newest < end; }
};

__device__ __forceinline__ int NumAttnItems(const DecodeStepParams& p) {
  return p.num_seqs * p.num_kv_heads * p.num_splits;
}

__device__ __forceinline__ int TokensPerSplit(const DecodeStepParams& p, int kv_tokens) {
  const int per = (p.max_context_len + p.num_splits - 1) / p.num_splits;
  return (per + kv_tokens - 1) / kv_tokens * kv_tokens;
}

__device__ AttnItem MakeItem(const DecodeStepParams& p, int item, int tokens_per_split) {
  AttnItem it;
  it.split = item % p.num_splits;
  it.kvh = (item / p.num_splits) % p.num_kv_heads;
  it.seq = item / (p.num_splits * p.num_kv_heads);
  const int ctx = p.context_lens[it.seq];
  it.begin = it.split * tokens_per_split;
  it.end = min(ctx, it.begin + tokens_per_split);
  it.newest = ctx - 1;
  return it;
}

__device__ __forceinline__ __nv_bfloat16* KvLayer(const DecodeStepParams& p, int layer) {
  return p.kv_pool + static_cast<int64_t>(layer) * p.kv_layer_stride;
}

// ---------------------------------------------------------------------------------------
// Producer: kProducerWarps warps streaming the block's stages into the ring. Every stage's
// full barrier expects one arrival per producer lane: for a weight stage, lane 0 of warp 0
// arrives announcing the bytes of its tensor boxes and the others plainly; for a K/V stage
// each lane arrives once its share of the cp.async copies has landed.

struct Producer {
  unsigned char* ring;
  uint64_t* full;
  uint64_t* empty;
  int pw;  // producer warp, 0 .. kProducerWarps - 1
  int slot = 0;
  uint32_t phase = 0;
  int64_t wait_cycles = 0;  // lane 0 of producer warp 0, traced launches

  // Waits for a free slot; returns its memory. Whole warp.
  __device__ unsigned char* Acquire() {
    if ((threadIdx.x & 31) == 0) {
      const int64_t t0 = clock64();
      MbarWait(&empty[slot], phase ^ 1);
      wait_cycles += clock64() - t0;
    }
    __syncwarp();
    return ring + slot * kStageBytes;
  }
  __device__ void Advance() {
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1;
    }
  }
  // After the warp's cp.async copies into the slot are issued.
  __device__ void Commit() {
    CpAsyncArriveNoinc(&full[slot]);
    Advance();
  }

  // A weight stage: 16 rows x kChunk columns as tensor boxes of 8 rows x 256 columns
  // (4 KB each; smem [column half][16 rows][256]), issued by one lane; the other producer
  // lanes only arrive, so the barrier counts the same arrivals as for a K/V stage.
  __device__ void GemvStages(const Gemv& gv, const unsigned char* maps) {
    const int lane = threadIdx.x & 31;
    const int tiles = gv.NumTiles(), chunks = gv.NumChunks();
    const unsigned char* map = maps + static_cast<size_t>(gv.map) * 128;
    if (pw == 0 && lane == 0 && tiles > 0)
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
    for (int t0 = 0; t0 < tiles; t0 += kGroupTiles) {
      const int nt = min(kGroupTiles, tiles - t0);
      for (int c = 0; c < chunks; ++c) {
        const int halves = gv.k - c * kChunk > kChunk / 2 ? 2 : 1;
        for (int t = t0; t < t0 + nt; ++t) {
          int lo, n_lo, hi, n_hi;
          gv.Tile(t, lo, n_lo, hi, n_hi);
          unsigned char* dst = Acquire();
          if (pw == 0 && lane == 0) {
            MbarArriveExpectTx(&full[slot], halves * (n_hi > 0 ? 2 : 1) * kBoxBytes);
            for (int h = 0; h < halves; ++h) {
              const int col = c * kChunk + h * kBoxCols;
              TensorBox(dst + h * 2 * kBoxBytes, map, col, lo, &full[slot]);
              if (n_hi > 0) TensorBox(dst + h * 2 * kBoxBytes + kBoxBytes, map, col, hi, &full[slot]);
            }
          } else {
            MbarArrive(&full[slot]);
          }
          Advance();
        }
      }
    }
  }

  template <int kHeadDim>
  __device__ void AttnStages(const DecodeStepParams& p, int layer) {
    constexpr int kKvTokens = KvTokensPerStage(kHeadDim), kRow = KvRow(kHeadDim);
    constexpr int kVecs = kHeadDim / 8, kTokensPerPass = 32 / kVecs;
    const int lane = threadIdx.x & 31, v = lane % kVecs;
    const int tps = TokensPerSplit(p, kKvTokens), bs_shift = __ffs(p.block_size) - 1;
    const __nv_bfloat16* kv = KvLayer(p, layer);
    for (int i = blockIdx.x; i < NumAttnItems(p); i += p.num_blocks) {
      const AttnItem it = MakeItem(p, i, tps);
      const int stages = it.NumStages(kKvTokens);
      const int32_t* table = p.block_tables + static_cast<int64_t>(it.seq) * p.max_blocks_per_seq;
      for (int s = 0; s < stages; ++s) {
        const int a = it.begin + s * kKvTokens;
        const int n = min(kKvTokens, it.StreamEnd() - a);
        unsigned char* dst = Acquire();
        for (int t = pw * kTokensPerPass + lane / kVecs; t < n; t += kProducerWarps * kTokensPerPass) {
          const int pos = a + t;
          const int64_t page = table[pos >> bs_shift];
          const __nv_bfloat16* k_src = detail::KvCacheRow(kv, page, 0, it.kvh, pos & (p.block_size - 1),
                                                          p.num_kv_heads, p.block_size, kHeadDim);
          const __nv_bfloat16* v_src = detail::KvCacheRow(kv, page, 1, it.kvh, pos & (p.block_size - 1),
                                                          p.num_kv_heads, p.block_size, kHeadDim);
          detail::CpAsync16(dst + (t * kRow + v * 8) * 2, k_src + v * 8);
          detail::CpAsync16(dst + ((kKvTokens + t) * kRow + v * 8) * 2, v_src + v * 8);
        }
        Commit();
      }
    }
  }

  template <int kHeadDim>
  __device__ void Run(const DecodeStepParams& p, const unsigned char* maps) {
    int64_t* trace = BlockTrace(p);
    auto mark = [&](int event) {
      if (trace != nullptr && pw == 0 && (threadIdx.x & 31) == 0) {
        int64_t* e = trace + DecodeStepTraceProducer(p.num_layers, event);
        e[0] = static_cast<int64_t>(GlobalTimerNs());
        e[1] = wait_cycles;
        wait_cycles = 0;
      }
    };
    for (int l = 0; l < p.num_layers; ++l) {
      GemvStages(MakeGemv(p, l, kQkv, blockIdx.x), maps);
      mark(5 * l);
      AttnStages<kHeadDim>(p, l);
      mark(5 * l + 1);
      GemvStages(MakeGemv(p, l, kO, blockIdx.x), maps);
      mark(5 * l + 2);
      GemvStages(MakeGemv(p, l, kGateUp, blockIdx.x), maps);
      mark(5 * l + 3);
      GemvStages(MakeGemv(p, l, kDown, blockIdx.x), maps);
      mark(5 * l + 4);
    }
    if (p.num_logits_rows > 0) GemvStages(MakeGemv(p, p.num_layers, kLmHead, blockIdx.x), maps);
    mark(5 * p.num_layers);
  }
};

// ---------------------------------------------------------------------------------------
// Consumers.

struct ConsumerRing {
  unsigned char* ring;
  uint64_t* full;
  uint64_t* empty;
  int slot = 0;
  uint32_t phase = 0;
  bool timed = false;        // thread 0 counts its waiting cycles (traced launches)
  int64_t wait_cycles = 0;
  __device__ unsigned char* Wait() {
    const int64_t t0 = timed ? clock64() : 0;
    MbarWait(&full[slot], phase);
    if (timed) wait_cycles += clock64() - t0;
    return ring + slot * kStageBytes;
  }
  // After the whole warp is done reading the slot.
  __device__ void Release() {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) MbarArrive(&empty[slot]);
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1;
    }
  }
};

// One 32-wide k step for a 16-row weight tile and 8 token columns. Lane (g, t) holds the 8
// consecutive k values 8t .. 8t + 7 of weight rows g and g + 8 and of token g; mapping the
// logical k (2t, 2t+1, 2t+8, 2t+9) of the first mma to physical 8t + (0..3) and of the
// second to 8t + (4..7) is a permutation both operands share.
__device__ __forceinline__ void MmaStep(float (&acc)[2][4], const uint4& w_lo, const uint4& w_hi, const uint4& x) {
  const uint32_t a0[4] = {w_lo.x, w_hi.x, w_lo.y, w_hi.y};
  const uint32_t a1[4] = {w_lo.z, w_hi.z, w_lo.w, w_hi.w};
  detail::Mma16816(acc[0], a0, x.x, x.y);
  detail::Mma16816(acc[1], a1, x.z, x.w);
}

__device__ __forceinline__ uint4 Lds128(const unsigned char* p) { return *reinterpret_cast<const uint4*>(p); }

struct Consumer {
  const DecodeStepParams& p;
  unsigned char* smem;
  ConsumerRing ring;
  uint32_t* counters;
  int sync_id = 0;
  // Workspace.
  float* ssq;  // [kDecodeStepMaxBlocks][kMaxSeqs]: each block's sum of squares of its residual rows
  float* residual;
  __nv_bfloat16 *x_norm, *qkv, *attn_out, *act;
  float *part_o, *part_lse;
  uint32_t* merge_counters;

  __device__ void Sync() {
    int64_t* trace = BlockTrace(p);
    if (trace != nullptr) trace += DecodeStepTraceBarrier(sync_id);
    GridSync(&counters[sync_id], p.num_blocks, trace);
    if (trace != nullptr && threadIdx.x == 0) {
      trace[2] = ring.wait_cycles;
      ring.wait_cycles = 0;
    }
    ++sync_id;
  }

  // Copies chunk c of x ([m, k] bf16, row stride k) into x slot `buf` of the scratch
  // (m rows of kXPitch bytes; cp.async, one group committed by every consumer thread,
  // possibly empty).
  __device__ void IssueX(const __nv_bfloat16* x, int k, int m, int c, int buf) {
    if (c * kChunk < k) {
      const int vecs = min(kChunk, k - c * kChunk) / 8;
      unsigned char* dst = smem + SmemLayout::kScratch + buf * m * kXPitch;
      for (int i = threadIdx.x; i < m * vecs; i += kConsumers) {
        const int tok = i / vecs, v = i % vecs;
        detail::CpAsync16(dst + tok * kXPitch + v * 16, x + static_cast<int64_t>(tok) * k + c * kChunk + v * 8);
      }
    }
    detail::CpAsyncCommit();
  }

  // y = W x for the block's rows of `gv` and the m tokens of x ([m, gv.k] bf16), in tile
  // groups: for each chunk of x, each tile of the group. `out(tile, i, token, value)` (or,
  // paired, `out(tile, i, token, gate, up)`) gets each output. All consumer threads.
  template <typename Out>
  __device__ void RunGemv(const Gemv& gv, const __nv_bfloat16* x, int m, Out&& out) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int tiles = gv.NumTiles(), chunks = gv.NumChunks();
    float4* partial = reinterpret_cast<float4*>(smem + SmemLayout::kScratch);
    for (int t0 = 0; t0 < tiles; t0 += kGroupTiles) {
      const int nt = min(kGroupTiles, tiles - t0);
      float acc[kGroupTiles][2][4];
#pragma unroll
      for (int u = 0; u < kGroupTiles; ++u)
#pragma unroll
        for (int h = 0; h < 2; ++h) acc[u][h][0] = acc[u][h][1] = acc[u][h][2] = acc[u][h][3] = 0.f;
      // All of x when it fits the scratch (small batches: no barrier per chunk, and no
      // chunk that arrives late because only a few stages hid its load); else a ring of
      // kXBufs chunks, two ahead.
      const bool whole = chunks * m * kXPitch <= kScratchBytes;
      if (whole) {
        for (int c = 0; c < chunks; ++c) IssueX(x, gv.k, m, c, c);
        detail::CpAsyncWait<0>();
        ConsumerSync();
      } else {
        IssueX(x, gv.k, m, 0, 0);
        IssueX(x, gv.k, m, 1, 1);
      }
      for (int c = 0; c < chunks; ++c) {
        if (!whole) {
          detail::CpAsyncWait<1>();
          ConsumerSync();  // chunk c visible to all; every warp is done with chunk c - 1
          IssueX(x, gv.k, m, c + 2, (c + 2) % kXBufs);
        }
        const unsigned char* xb = smem + SmemLayout::kScratch + (whole ? c : c % kXBufs) * m * kXPitch;
        const int steps = min(kChunk, gv.k - c * kChunk) / kStepK;
        uint4 xv[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int s = warp + kConsumerWarps * j;
          xv[j] = s < steps && g < m ? Lds128(xb + g * kXPitch + (s * kStepK + 8 * t4) * 2) : make_uint4(0, 0, 0, 0);
        }
        // Unrolled over the group's tiles, so that each tile's accumulators are named at
        // compile time (a runtime tile index cost an 8-way branch per stage: ~100
        // instructions per warp per stage, which bounded the consumers, ncu 2026-12-02).
#pragma unroll
        for (int tt = 0; tt < kGroupTiles; ++tt) {
          if (tt >= nt) break;
          const unsigned char* st = ring.Wait();
          uint4 wl[2], wh[2];
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int s = warp + kConsumerWarps * j;
            if (s < steps) {  // [column half][16 rows][kBoxCols]
              const unsigned char* base = st + (s >> 3) * 2 * kBoxBytes + ((s & 7) * kStepK + 8 * t4) * 2;
              wl[j] = Lds128(base + g * kBoxCols * 2);
              wh[j] = Lds128(base + (g + 8) * kBoxCols * 2);
            }
          }
          ring.Release();
#pragma unroll
          for (int j = 0; j < 2; ++j)
            if (warp + kConsumerWarps * j < steps) MmaStep(acc[tt], wl[j], wh[j], xv[j]);
        }
      }
      detail::CpAsyncWait<0>();
      ConsumerSync();  // the x buffers are free for the partial tiles
#pragma unroll
      for (int u = 0; u < kGroupTiles; ++u) {
        if (u < nt) {
          partial[(u * kConsumerWarps + warp) * 32 + lane] =
              make_float4(acc[u][0][0] + acc[u][1][0], acc[u][0][1] + acc[u][1][1], acc[u][0][2] + acc[u][1][2],
                          acc[u][0][3] + acc[u][1][3]);
        }
      }
      ConsumerSync();
      // The mma's D fragment holds (row i, token j) in lane (i % 8) * 4 + j / 2, element
      // (i / 8) * 2 + j % 2. Consecutive threads take consecutive rows of a token.
      auto sum = [&](int u, int i, int j) {
        const int src = (i % 8) * 4 + j / 2, e = (i / 8) * 2 + j % 2;
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < kConsumerWarps; ++w)
          v += reinterpret_cast<const float*>(&partial[(u * kConsumerWarps + w) * 32 + src])[e];
        return v;
      };
      const int rows = gv.paired ? 8 : 16;
      for (int o = threadIdx.x; o < nt * rows * m; o += kConsumers) {
        const int u = o / (rows * m), j = (o / rows) % m, i = o % rows;
        int lo, n_lo, hi, n_hi;
        gv.Tile(t0 + u, lo, n_lo, hi, n_hi);
        if (gv.paired) {
          if (i < n_lo) out(lo + i, j, sum(u, i, j), sum(u, i + 8, j));
        } else if (i < 8 ? i < n_lo : i - 8 < n_hi) {
          out(i < 8 ? lo + i : hi + i - 8, j, sum(u, i, j), 0.f);
        }
      }
      ConsumerSync();  // the partial tiles are read before the next group's x chunks land
    }
  }

  // This block's sum of squares of residual[tok][elems] for each token, into ssq.
  __device__ void PartialSsq(Range elems, int m) {
    ConsumerSync();  // the residual writes of this block are done
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp < m) {
      const float* row = residual + static_cast<int64_t>(warp) * p.hidden;
      float s = 0.f;
      for (int e = elems.begin + lane; e < elems.begin + elems.count; e += 32) {
        const float v = LoadCg(row + e);
        s += v * v;
      }
      s = WarpSum(s);
      if (lane == 0) ssq[blockIdx.x * kMaxSeqs + warp] = s;
    }
  }

  // inv_rms of residual row `row` from the blocks' partial sums, the same on every block.
  __device__ float InvRms(int row) {
    const int lane = threadIdx.x & 31;
    float s = 0.f;
    for (int b = lane; b < p.num_blocks; b += 32) s += LoadCg(ssq + b * kMaxSeqs + row);
    return rsqrtf(WarpSum(s) / p.hidden + p.eps);
  }

  // x_norm[i] = RMSNorm(residual[rows[i]]) * weight for i < n, this block's share of the
  // 8-element vectors (rows == nullptr: row i). Ends with a grid barrier.
  __device__ void Norm(const __nv_bfloat16* weight, int n, const int32_t* rows) {
    float* inv = reinterpret_cast<float*>(smem + SmemLayout::kInvRms);
    const int warp = threadIdx.x >> 5;
    if (warp < n) {
      const float v = InvRms(rows != nullptr ? rows[warp] : warp);
      if ((threadIdx.x & 31) == 0) inv[warp] = v;
    }
    ConsumerSync();
    const int vecs = p.hidden / 8;
    const Range r = Share(vecs, blockIdx.x, p.num_blocks, 0);
    for (int i = threadIdx.x; i < n * r.count; i += kConsumers) {
      const int tok = i / r.count, v = r.begin + i % r.count;
      const int row = rows != nullptr ? rows[tok] : tok;
      const float4* src = reinterpret_cast<const float4*>(residual + static_cast<int64_t>(row) * p.hidden) + 2 * v;
      const float4 a = LoadCg(src), b = LoadCg(src + 1);
      float x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}, gw[8];
      Bf16x8ToFloat(reinterpret_cast<const uint4*>(weight)[v], gw);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] = x[e] * inv[tok] * gw[e];  // as RmsNormKernel
      reinterpret_cast<uint4*>(x_norm + static_cast<int64_t>(tok) * p.hidden)[v] = FloatToBf16x8(x);
    }
    Sync();
  }

  __device__ void Embed() {
    const int vecs = p.hidden / 8;
    const Range r = Share(vecs, blockIdx.x, p.num_blocks, 0);
    for (int i = threadIdx.x; i < p.num_seqs * r.count; i += kConsumers) {
      const int tok = i / r.count, v = r.begin + i % r.count;
      float x[8];
      Bf16x8ToFloat(reinterpret_cast<const uint4*>(p.embed + static_cast<int64_t>(p.token_ids[tok]) * p.hidden)[v],
                    x);
      float4* dst = reinterpret_cast<float4*>(residual + static_cast<int64_t>(tok) * p.hidden) + 2 * v;
      dst[0] = make_float4(x[0], x[1], x[2], x[3]);
      dst[1] = make_float4(x[4], x[5], x[6], x[7]);
    }
    PartialSsq({8 * r.begin, 8 * r.count}, p.num_seqs);
    Sync();
  }

  // Attention of this block's items: (sequence, KV head, split) with the group's query
  // heads as the rows of one mma tile (decode_attention_impl.cuh); the K/V stages' 16-token
  // blocks go to the 8 warps in turn, each keeping its own online-softmax state, and the
  // newest token (its K/V made here from the QKV row and stored into the cache) is one
  // more block. The warps' states are merged into the output (1 split) or the split's
  // partial output and log-sum-exp. Ends with a grid barrier.
  template <int kHeadDim>
  __device__ void Attention(int layer) {
    constexpr int kKvTokens = KvTokensPerStage(kHeadDim), kRow = KvRow(kHeadDim);
    constexpr int kBlocksPerStage = kKvTokens / 16;
    constexpr int kRowVecs = kRow / 8;  // 16-byte pieces of a padded row
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int group = p.num_q_heads / p.num_kv_heads;
    const int tps = TokensPerSplit(p, kKvTokens);
    const float scale_log2 = p.softmax_scale * detail::kLog2e;
    const DecodeStepLayer& L = p.layers[layer];
    __nv_bfloat16* kv_layer = KvLayer(p, layer);
    __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem + SmemLayout::kQ);  // rows >= group stay zero
    __nv_bfloat16* new_k = reinterpret_cast<__nv_bfloat16*>(smem + SmemLayout::kScratch);  // row 0
    __nv_bfloat16* new_v = new_k + 16 * kRow;  // row 0; rows 1..15 zero
    float* o_s = reinterpret_cast<float*>(smem + SmemLayout::kScratch);
    float* m_s = reinterpret_cast<float*>(smem + SmemLayout::kWarpMl);
    float* l_s = m_s + kConsumerWarps * kMaxGroup;
    for (int i = blockIdx.x; i < NumAttnItems(p); i += p.num_blocks) {
      const AttnItem it = MakeItem(p, i, tps);
      const bool has_newest = it.HasNewest();
      // q of the group's heads (RoPE, optional q norm) and, where this split holds it, the
      // newest token's K (RoPE, optional k norm) and V: as the per-op path computes them.
      const auto angles = rope_detail::AnglesAt<kHeadDim>(p.rope, static_cast<float>(p.positions[it.seq]));
      const __nv_bfloat16* row = qkv + static_cast<int64_t>(it.seq) * QkvRows(p);
      for (int h = warp; h < group + (has_newest ? 2 : 0); h += kConsumerWarps) {
        float x1[rope_detail::LaneAngles<kHeadDim>::kPairs], x2[rope_detail::LaneAngles<kHeadDim>::kPairs];
        if (h < group) {
          rope_detail::LoadHead<kHeadDim, true>(row + (it.kvh * group + h) * kHeadDim, L.q_norm, p.eps, true, angles,
                                                x1, x2);
          rope_detail::StoreHead<kHeadDim>(q_s + h * kRow, x1, x2);
          continue;
        }
        const int kvi = h - group;
        rope_detail::LoadHead<kHeadDim, true>(row + (p.num_q_heads + kvi * p.num_kv_heads + it.kvh) * kHeadDim,
                                              kvi == 0 ? L.k_norm : nullptr, p.eps, kvi == 0, angles, x1, x2);
        rope_detail::StoreHead<kHeadDim>(kvi == 0 ? new_k : new_v, x1, x2);
        const int64_t slot = p.slot_mapping[it.seq];
        if (slot >= 0 && slot / p.block_size < p.num_cache_blocks) {
          rope_detail::StoreHead<kHeadDim>(
              detail::KvCacheRow(kv_layer, slot / p.block_size, kvi, it.kvh, static_cast<int>(slot % p.block_size),
                                 p.num_kv_heads, p.block_size, kHeadDim),
              x1, x2);
        }
      }
      if (has_newest) {
        for (int e = threadIdx.x; e < 15 * kRowVecs; e += kConsumers)
          reinterpret_cast<uint4*>(new_v + kRow)[e] = make_uint4(0, 0, 0, 0);
      }
      ConsumerSync();
      decode_detail::WarpState<kHeadDim> st;
      decode_detail::InitState<kHeadDim>(st, q_s);
      const int stages = it.NumStages(kKvTokens);
      for (int s = 0; s < stages; ++s) {
        __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(ring.Wait());
        __nv_bfloat16* vs = ks + kKvTokens * kRow;
        const int n = min(kKvTokens, it.StreamEnd() - (it.begin + s * kKvTokens));
#pragma unroll
        for (int b = 0; b < kBlocksPerStage; ++b) {
          if ((s * kBlocksPerStage + b) % kConsumerWarps != warp || 16 * b >= n) continue;
          if (n < 16 * b + 16) {  // V rows past the stage's tokens: zero (p = 0 there, but 0 * NaN bits is NaN)
            for (int e = lane; e < (16 * b + 16 - n) * kRowVecs; e += 32)
              reinterpret_cast<uint4*>(vs + (n + e / kRowVecs) * kRow)[e % kRowVecs] = make_uint4(0, 0, 0, 0);
            __syncwarp();
          }
          decode_detail::ComputeTile<kHeadDim, false>(st, ks, vs, n, scale_log2, b);
        }
        ring.Release();
      }
      if (has_newest && warp == (stages * kBlocksPerStage) % kConsumerWarps)
        decode_detail::ComputeTile<kHeadDim, false>(st, new_k, new_v, 1, scale_log2, 0);
      ConsumerSync();  // the newest token's tile is read: the scratch takes the warps' partial outputs
      decode_detail::StoreWarpState<kHeadDim>(st, group, warp, kMaxGroup, o_s, m_s, l_s);
      ConsumerSync();
      for (int e = threadIdx.x; e < group * kHeadDim; e += kConsumers) {
        const int h = e / kHeadDim, d = e % kHeadDim;
        float mx, den;
        const float out =
            decode_detail::MergeWarpStates<kHeadDim, kConsumerWarps>(h, d, kMaxGroup, o_s, m_s, l_s, mx, den);
        const int64_t qh = static_cast<int64_t>(it.seq) * p.num_q_heads + it.kvh * group + h;
        if (p.num_splits == 1) {
          attn_out[qh * kHeadDim + d] = __float2bfloat16(out);
        } else {
          part_o[(qh * p.num_splits + it.split) * kHeadDim + d] = out;
          if (d == 0) part_lse[qh * p.num_splits + it.split] = den > 0.f ? mx + log2f(den) : -INFINITY;
        }
      }
      ConsumerSync();  // the scratch and q_s are free for the next item; the partials are written
      if (p.num_splits > 1) MergeIfLast<kHeadDim>(it.seq, it.kvh, group);
    }
    Sync();
  }

  // The last split of (seq, kvh) to finish merges the group's partial outputs into
  // attn_out (as DecodeAttentionMergeKernel) and resets the arrival counter for the next
  // layer. REQUIRES: this block's partials written and ordered by a consumer barrier.
  template <int kHeadDim>
  __device__ void MergeIfLast(int seq, int kvh, int group) {
    int* last = reinterpret_cast<int*>(smem + SmemLayout::kFlag);
    uint32_t* ctr = merge_counters + seq * p.num_kv_heads + kvh;
    if (threadIdx.x == 0) {
      __threadfence();  // this block's partials before its arrival
      *last = atomicAdd(ctr, 1u) == static_cast<uint32_t>(p.num_splits) - 1;
      if (*last) {
        __threadfence();  // the other splits' partials after their arrivals
        *ctr = 0;
      }
    }
    ConsumerSync();
    if (*last) {
      const int S = p.num_splits;
      for (int e = threadIdx.x; e < group * kHeadDim; e += kConsumers) {
        const int64_t qh = static_cast<int64_t>(seq) * p.num_q_heads + kvh * group + e / kHeadDim;
        const int d = e % kHeadDim;
        const float* lse = part_lse + qh * S;
        float mx = -INFINITY;
        for (int s = 0; s < S; ++s) mx = fmaxf(mx, LoadCg(lse + s));
        float num = 0.f, den = 0.f;
        for (int s = 0; s < S; ++s) {
          const float w = mx == -INFINITY ? 0.f : exp2f(LoadCg(lse + s) - mx);
          den += w;
          num += w * LoadCg(part_o + (qh * S + s) * kHeadDim + d);
        }
        attn_out[qh * kHeadDim + d] = __float2bfloat16(den > 0.f ? num / den : 0.f);
      }
    }
    ConsumerSync();  // the flag is read before the next item's arrival writes it
  }

  template <int kHeadDim>
  __device__ void Run() {
    const int m = p.num_seqs;
    const int qkv_rows = QkvRows(p);
    Embed();
    for (int layer = 0; layer < p.num_layers; ++layer) {
      const DecodeStepLayer& L = p.layers[layer];
      Norm(L.input_norm, m, nullptr);
      RunGemv(MakeGemv(p, layer, kQkv, blockIdx.x), x_norm, m, [&](int row, int tok, float v, float) {
        if (L.qkv_bias != nullptr) v += __bfloat162float(L.qkv_bias[row]);
        qkv[static_cast<int64_t>(tok) * qkv_rows + row] = __float2bfloat16(v);
      });
      Sync();
      Attention<kHeadDim>(layer);
      const Gemv o = MakeGemv(p, layer, kO, blockIdx.x);
      RunGemv(o, attn_out, m, [&](int row, int tok, float v, float) {
        if (L.o_bias != nullptr) v += __bfloat162float(L.o_bias[row]);
        float* r = residual + static_cast<int64_t>(tok) * p.hidden + row;
        *r = LoadCg(r) + v;
      });
      PartialSsq(o.units, m);
      Sync();
      Norm(L.post_norm, m, nullptr);
      RunGemv(MakeGemv(p, layer, kGateUp, blockIdx.x), x_norm, m, [&](int f, int tok, float gate, float up) {
        // As the per-op path: gate/up rounded to bf16, then SiluMulKernel's math.
        const float g = __bfloat162float(__float2bfloat16(gate)), u = __bfloat162float(__float2bfloat16(up));
        act[static_cast<int64_t>(tok) * p.ffn + f] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
      });
      Sync();
      const Gemv down = MakeGemv(p, layer, kDown, blockIdx.x);
      RunGemv(down, act, m, [&](int row, int tok, float v, float) {
        float* r = residual + static_cast<int64_t>(tok) * p.hidden + row;
        *r = LoadCg(r) + v;
      });
      PartialSsq(down.units, m);
      Sync();
    }
    if (p.num_logits_rows == 0) return;
    Norm(p.final_norm, p.num_logits_rows, p.logits_rows);
    RunGemv(MakeGemv(p, p.num_layers, kLmHead, blockIdx.x), x_norm, p.num_logits_rows,
            [&](int row, int tok, float v, float) { p.logits[static_cast<int64_t>(tok) * p.vocab + row] = v; });
  }
};

// Workspace layout (256-byte aligned pieces), the same for the plan and the kernel.
struct Workspace {
  size_t maps, counters, merge_counters, ssq, residual, x_norm, qkv, attn_out, act, part_o, part_lse, bytes;
  int num_counters;
};

__host__ __device__ inline size_t Align256(size_t x) { return (x + 255) / 256 * 256; }

__host__ __device__ inline Workspace LayoutWorkspace(const DecodeStepParams& p, int num_splits) {
  Workspace w{};
  const size_t m = kMaxSeqs, qkv_rows = static_cast<size_t>(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim;
  const size_t q_dims = static_cast<size_t>(p.num_q_heads) * p.head_dim;
  w.num_counters = DecodeStepTraceBarriers(p.num_layers);  // one per grid barrier (+ the exit counter)
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += Align256(bytes);
    return here;
  };
  w.maps = take(static_cast<size_t>(4 * p.num_layers + 1) * 128);  // tensor maps, 64-byte aligned
  w.counters = take(static_cast<size_t>(w.num_counters + 1) * 4);
  w.merge_counters = take(m * p.num_kv_heads * 4);  // splits done per (sequence, KV head)
  w.ssq = take(static_cast<size_t>(kDecodeStepMaxBlocks) * kMaxSeqs * 4);
  w.residual = take(m * p.hidden * 4);
  w.x_norm = take(m * p.hidden * 2);
  w.qkv = take(m * qkv_rows * 2);
  w.attn_out = take(m * q_dims * 2);
  w.act = take(m * p.ffn * 2);
  w.part_o = take(num_splits > 1 ? m * q_dims * num_splits * 4 : 0);
  w.part_lse = take(num_splits > 1 ? m * p.num_q_heads * num_splits * 4 : 0);
  w.bytes = at;
  return w;
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, 1) DecodeStepKernel(const __grid_constant__ DecodeStepParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + SmemLayout::kBars);
  uint64_t* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(&full[s], 32 * kProducerWarps);  // the producer lanes' cp.async arrivals
      MbarInit(&empty[s], kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (p.trace != nullptr && threadIdx.x == 0) {
    BlockTrace(p)[0] = static_cast<int64_t>(GlobalTimerNs());
    BlockTrace(p)[1] = clock64();
  }
  const Workspace ws = LayoutWorkspace(p, p.num_splits);
  unsigned char* base = static_cast<unsigned char*>(p.workspace);
  uint32_t* counters = reinterpret_cast<uint32_t*>(base + ws.counters);
  if (threadIdx.x >= kConsumers) {
    Producer prod{smem + SmemLayout::kRing, full, empty, (static_cast<int>(threadIdx.x) - kConsumers) / 32};
    prod.Run<kHeadDim>(p, base + ws.maps);
    return;
  }
  Consumer c{p, smem, {smem + SmemLayout::kRing, full, empty}, counters};
  c.ring.timed = p.trace != nullptr && threadIdx.x == 0;
  for (int e = threadIdx.x; e < 16 * KvRow(kHeadDim) / 8; e += kConsumers)
    reinterpret_cast<uint4*>(smem + SmemLayout::kQ)[e] = make_uint4(0, 0, 0, 0);  // q rows past the group
  c.ssq = reinterpret_cast<float*>(base + ws.ssq);
  c.residual = reinterpret_cast<float*>(base + ws.residual);
  c.x_norm = reinterpret_cast<__nv_bfloat16*>(base + ws.x_norm);
  c.qkv = reinterpret_cast<__nv_bfloat16*>(base + ws.qkv);
  c.attn_out = reinterpret_cast<__nv_bfloat16*>(base + ws.attn_out);
  c.act = reinterpret_cast<__nv_bfloat16*>(base + ws.act);
  c.part_o = reinterpret_cast<float*>(base + ws.part_o);
  c.part_lse = reinterpret_cast<float*>(base + ws.part_lse);
  c.merge_counters = reinterpret_cast<uint32_t*>(base + ws.merge_counters);
  c.Run<kHeadDim>();
  // The last block out resets the barrier counters for the next launch: every other block
  // has passed all of its barriers by the time it counts itself out.
  ConsumerSync();
  if (p.trace != nullptr && threadIdx.x == 0) {
    int64_t* end = BlockTrace(p) + DecodeStepTraceStride(p.num_layers) - 2;
    end[0] = static_cast<int64_t>(GlobalTimerNs());
    end[1] = clock64();
  }
  if (threadIdx.x == 0) {
    __threadfence();
    uint32_t* exit_counter = counters + ws.num_counters;
    if (atomicAdd(exit_counter, 1u) == static_cast<uint32_t>(p.num_blocks) - 1) {
      for (int i = 0; i <= ws.num_counters; ++i) counters[i] = 0;
      __threadfence();
    }
  }
}

template <int kHeadDim>
Status LaunchTyped(const DecodeStepParams& p, cudaStream_t stream) {
  static const cudaError_t attr = cudaFuncSetAttribute(
      DecodeStepKernel<kHeadDim>, cudaFuncAttributeMaxDynamicSharedMemorySize, SmemLayout::kBytes);
  if (attr != cudaSuccess) return cuda::CudaStatus(attr, "cudaFuncSetAttribute(DecodeStepKernel)");
  cudaLaunchAttribute attrs[1];
  attrs[0].id = cudaLaunchAttributeCooperative;
  attrs[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(p.num_blocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = SmemLayout::kBytes;
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&config, DecodeStepKernel<kHeadDim>, p);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cuda::CudaStatus(err, "DecodeStepKernel");
  }
  return cuda::LastLaunchStatus("DecodeStepKernel");
}

}  // namespace

Status CheckDecodeStepShape(const DecodeStepParams& p) {
  if (p.num_layers < 1 || p.num_layers > kDecodeStepMaxLayers)
    return InvalidArgumentError("DecodeStep: layers must be in [1, 96]");
  if (p.head_dim != 64 && p.head_dim != 128) return InvalidArgumentError("DecodeStep: head_dim must be 64 or 128");
  if (p.num_q_heads <= 0 || p.num_kv_heads <= 0 || p.num_q_heads % p.num_kv_heads != 0 ||
      p.num_q_heads / p.num_kv_heads > kMaxGroup)
    return InvalidArgumentError("DecodeStep: need Hq % Hkv == 0 and Hq / Hkv <= 8");
  if (p.hidden <= 0 || p.hidden % kStepK != 0 || p.ffn <= 0 || p.ffn % kStepK != 0 || p.vocab <= 0)
    return InvalidArgumentError("DecodeStep: hidden and ffn must be positive multiples of 32");
  if ((p.num_q_heads * p.head_dim) % kStepK != 0) return InvalidArgumentError("DecodeStep: Hq * hd % 32 != 0");
  if (p.block_size < 8 || p.block_size > 64 || (p.block_size & (p.block_size - 1)) != 0)
    return InvalidArgumentError("DecodeStep: block_size must be a power of two in [8, 64]");
  if (!(p.eps > 0.f) || !(p.softmax_scale > 0.f)) return InvalidArgumentError("DecodeStep: eps and scale must be > 0");
  return Status::Ok();
}

StatusOr<DecodeStepPlan> PlanDecodeStep(const DecodeStepParams& p, int num_sms) {
  TANDEM_RETURN_IF_ERROR(CheckDecodeStepShape(p));
  if (num_sms <= 0) return InvalidArgumentError("PlanDecodeStep: num_sms <= 0");
  if (p.num_seqs < 1 || p.num_seqs > kMaxSeqs) return InvalidArgumentError("DecodeStep: 1 to 8 sequences");
  if (p.max_context_len < 1) return InvalidArgumentError("DecodeStep: max_context_len < 1");
  DecodeStepPlan plan;
  plan.num_blocks = std::min(num_sms, kDecodeStepMaxBlocks);
  // Splits: as many attention items as blocks (each block streams about one item's K/V),
  // at least one KV stage per split.
  const int per_split = p.num_seqs * p.num_kv_heads;
  const int max_splits = (p.max_context_len + KvTokensPerStage(p.head_dim) - 1) / KvTokensPerStage(p.head_dim);
  plan.num_splits = std::clamp(plan.num_blocks / per_split, 1, std::max(1, max_splits));
  plan.workspace_bytes = LayoutWorkspace(p, plan.num_splits).bytes;
  return plan;
}

StatusOr<size_t> DecodeStepMaxWorkspaceBytes(const DecodeStepParams& params, int num_sms, int max_context_len) {
  DecodeStepParams p = params;
  p.max_context_len = max_context_len;
  size_t most = 0;
  for (int m = 1; m <= kMaxSeqs; ++m) {
    p.num_seqs = m;
    TANDEM_ASSIGN_OR_RETURN(DecodeStepPlan plan, PlanDecodeStep(p, num_sms));
    most = std::max(most, plan.workspace_bytes);
  }
  return most;
}

Status WriteDecodeStepTensorMaps(const DecodeStepParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(CheckDecodeStepShape(p));
  if (p.workspace == nullptr) return InvalidArgumentError("DecodeStep: null workspace");
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return InternalError("DecodeStep: the driver has no cuTensorMapEncodeTiled");
  std::vector<CUtensorMap> maps(4 * p.num_layers + 1);
  auto make = [&](CUtensorMap* map, const __nv_bfloat16* w, int64_t rows, int64_t cols) -> Status {
    if (w == nullptr) return InvalidArgumentError("DecodeStep: missing weight matrix");
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
    const cuuint32_t box[2] = {kBoxCols, 8}, elem_strides[2] = {1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(w), dims, strides,
                              box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return InternalError("DecodeStep: cuTensorMapEncodeTiled failed");
    return Status::Ok();
  };
  const int64_t qkv_rows = static_cast<int64_t>(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim;
  for (int l = 0; l < p.num_layers; ++l) {
    const DecodeStepLayer& L = p.layers[l];
    TANDEM_RETURN_IF_ERROR(make(&maps[4 * l + kQkv], L.qkv, qkv_rows, p.hidden));
    TANDEM_RETURN_IF_ERROR(make(&maps[4 * l + kO], L.o, p.hidden, static_cast<int64_t>(p.num_q_heads) * p.head_dim));
    TANDEM_RETURN_IF_ERROR(make(&maps[4 * l + kGateUp], L.gate_up, 2 * static_cast<int64_t>(p.ffn), p.hidden));
    TANDEM_RETURN_IF_ERROR(make(&maps[4 * l + kDown], L.down, p.hidden, p.ffn));
  }
  TANDEM_RETURN_IF_ERROR(make(&maps[4 * p.num_layers], p.lm_head, p.vocab, p.hidden));
  const Workspace ws = LayoutWorkspace(p, 1);
  return cuda::CudaStatus(cudaMemcpyAsync(static_cast<unsigned char*>(p.workspace) + ws.maps, maps.data(),
                                          maps.size() * sizeof(CUtensorMap), cudaMemcpyHostToDevice, stream),
                          "DecodeStep: tensor map upload");
}

Status LaunchDecodeStep(const DecodeStepParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(CheckDecodeStepShape(p));
  if (p.num_seqs < 1 || p.num_seqs > kMaxSeqs) return InvalidArgumentError("DecodeStep: 1 to 8 sequences");
  if (p.num_logits_rows < 0 || p.num_logits_rows > p.num_seqs)
    return InvalidArgumentError("DecodeStep: num_logits_rows out of [0, num_seqs]");
  if (p.num_blocks < 1 || p.num_blocks > kDecodeStepMaxBlocks || p.num_splits < 1)
    return InvalidArgumentError("DecodeStep: num_blocks / num_splits not from a plan");
  if (p.embed == nullptr || p.final_norm == nullptr || p.lm_head == nullptr || p.kv_pool == nullptr ||
      p.token_ids == nullptr || p.positions == nullptr || p.slot_mapping == nullptr || p.context_lens == nullptr ||
      p.block_tables == nullptr || p.workspace == nullptr ||
      (p.num_logits_rows > 0 && (p.logits == nullptr || p.logits_rows == nullptr)))
    return InvalidArgumentError("DecodeStep: null pointer");
  if (reinterpret_cast<uintptr_t>(p.workspace) % 256 != 0)
    return InvalidArgumentError("DecodeStep: workspace must be 256-byte aligned");
  for (int l = 0; l < p.num_layers; ++l) {
    const DecodeStepLayer& L = p.layers[l];
    if (L.input_norm == nullptr || L.qkv == nullptr || L.o == nullptr || L.post_norm == nullptr ||
        L.gate_up == nullptr || L.down == nullptr || (L.q_norm == nullptr) != (L.k_norm == nullptr))
      return InvalidArgumentError("DecodeStep: missing layer weights");
  }
  if (p.head_dim == 64) return LaunchTyped<64>(p, stream);
  return LaunchTyped<128>(p, stream);
}

}  // namespace tandem::kernels
