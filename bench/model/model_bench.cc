// Whole-model benchmark of the CUDA backend at the Llama-3-8B shape (32 layers, hidden
// 4096, 32 query / 8 KV heads of 128, FFN 14336, vocab 128256, bf16), random weights and
// KV generated on the GPU (no checkpoint file). Every step is runtime::LlamaModel::Forward
// as the engine runs it (Backend::BeginStep -> Forward -> EndStep: decode-only steps as
// CUDA graphs), on a VariantBackend over the CudaBackend that passes every op through
// unless a row asks for a variant.
//
// Prints, with ceilings measured in the same run (streaming-read HBM bandwidth over 4 GiB; HBM
// read as a decode-shaped cuBLAS GEMV, PERFORMANCE.md's reference; cuBLAS bf16 GEMM 8192^3):
//  - decode tokens/s at batch 1/8/64/256 x context 1K/8K, each as the ratio of its memory
//    floor (weights streamed + KV read, over the measured read bandwidth; a second column over
//    the GEMV's) to the step time: each step timed alone, its host work (batch plan,
//    metadata upload, recording) included: "(graph)"; and the same graph replayed back to
//    back, the GPU's time per step: "(graph replays)"; at batch <= 8 also with SiLU-mul as
//    a kernel and with RoPE + KV write as a kernel before the attention, and at b=1 1K the
//    GEMMs alone and everything but the attention (OpVariant), for attribution;
//  - prefill of 512/2K/4K/8K tokens: model FLOPs / time over the measured GEMM rate;
//  - KV swap through the host tier (CudaKvTierStorage: pinned memory, copy stream), 1 GiB
//    out and in, against one pinned cudaMemcpyAsync of the same size.
// Usage: model_bench [--quick] [--decode-only [--repeat N] [--reps R]] [--timeline]
//   --decode-only: only the decode rows at batch 1 and 8 (1K and 8K contexts; with --quick
//   1K only) with their SiLU comparison rows, and the b=1 attribution rows, N times over
//   (for A/B runs of two builds side by side), each the median of R timed steps (default 30).
//   --timeline: only the kernel timelines (CUPTI) of decode steps at b=1 / 8, 1K / 8K.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/gpu/fill_random.h"
#include "bench/gpu/streaming_read.h"
#include "bench/model/kernel_timeline.h"
#include "bench/model/variant_backend.h"
#include "common/cuda/cuda_status.h"
#include "common/cuda/gemm.h"
#include "common/cuda/kv_tier_storage_cuda.h"
#include "common/runtime/cuda_backend.h"
#include "common/runtime/llama_model.h"
#include "common/runtime/paged_kv_cache.h"

namespace tandem::bench {
namespace {

using runtime::Buffer;
using runtime::CudaBackend;
using runtime::LlamaModel;
using runtime::PagedKvCache;

constexpr int kLayers = 32, kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 14336;
constexpr int kVocab = 128256, kBlock = 16;
constexpr int kQkv = (kHeads + 2 * kKvHeads) * kHeadDim;
constexpr float kEps = 1e-5f;

#define CHECK_OK(expr)                                                                \
  do {                                                                                \
    ::tandem::Status _s = (expr);                                                     \
    if (!_s.ok()) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, _s.ToString().c_str()); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

template <typename T>
T Must(StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "error: %s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(v).value();
}

uint64_t g_seed = 1;

void Fill(CudaBackend& b, const Buffer& buf, float center, float spread) {
  const runtime::Tensor& t = buf.tensor();
  CHECK_OK(LaunchFillRandomBf16(static_cast<__nv_bfloat16*>(t.data), t.NumBytes() / 2, g_seed++, center, spread,
                                b.stream()));
}

Buffer Weight(CudaBackend& b, std::vector<int64_t> shape, float center, float spread, size_t* bytes) {
  Buffer buf = Must(b.Allocate(DType::kBF16, shape));
  Fill(b, buf, center, spread);
  if (bytes != nullptr) *bytes += buf.tensor().NumBytes();
  return buf;
}

model::ModelConfig LlamaConfig() {
  model::ModelConfig c;
  c.vocab_size = kVocab;
  c.hidden_size = kHidden;
  c.intermediate_size = kFfn;
  c.num_layers = kLayers;
  c.num_heads = kHeads;
  c.num_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  c.rms_norm_eps = kEps;
  c.rope_theta = 500000.0;
  c.rope_scaling = {model::RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192};
  c.max_position_embeddings = 8192 + kBlock;
  return c;
}

// Random weights of the Llama-3-8B shape on the GPU; `streamed` gets the bytes a decode step
// reads of them (all but the embedding).
runtime::LlamaWeights RandomWeights(CudaBackend& b, size_t* streamed) {
  runtime::LlamaWeights w;
  for (int l = 0; l < kLayers; ++l) {
    runtime::LlamaLayerWeights L;
    L.input_norm = Weight(b, {kHidden}, 1.f, 0.1f, streamed);
    L.qkv_proj = Weight(b, {kQkv, kHidden}, 0.f, 0.03f, streamed);
    L.o_proj = Weight(b, {kHidden, kHeads * kHeadDim}, 0.f, 0.03f, streamed);
    L.post_attention_norm = Weight(b, {kHidden}, 1.f, 0.1f, streamed);
    L.gate_up_proj = Weight(b, {2 * kFfn, kHidden}, 0.f, 0.03f, streamed);
    L.down_proj = Weight(b, {kHidden, kFfn}, 0.f, 0.02f, streamed);
    w.layers.push_back(std::move(L));
  }
  w.embed_tokens = Weight(b, {kVocab, kHidden}, 0.f, 1.f, nullptr);
  w.final_norm = Weight(b, {kHidden}, 1.f, 0.1f, streamed);
  w.lm_head = Weight(b, {kVocab, kHidden}, 0.f, 0.03f, streamed);
  return w;
}

// The chunks of one step: `seqs` sequences with `q_len` new tokens each, ending at context
// `ctx`; sequence i in blocks [i * blocks_per_seq, ...), each wanting logits for its last token.
class Batch {
 public:
  Batch(int seqs, int q_len, int ctx, int blocks_per_seq) : tokens_(seqs), tables_(seqs) {
    for (int i = 0; i < seqs; ++i) {
      for (int j = 0; j < q_len; ++j) tokens_[i].push_back((i * 7919 + j * 104729) % kVocab);
      for (int k = 0; k < (ctx + kBlock - 1) / kBlock; ++k) tables_[i].push_back(i * blocks_per_seq + k);
      chunks_.push_back(
          {.tokens = tokens_[i], .start_position = ctx - q_len, .block_table = tables_[i], .want_logits = true});
    }
  }
  Batch(const Batch&) = delete;  // chunks_ points into tokens_ and tables_
  Batch& operator=(const Batch&) = delete;
  std::span<const runtime::SeqChunk> chunks() const { return chunks_; }

 private:
  std::vector<std::vector<TokenId>> tokens_;
  std::vector<std::vector<BlockId>> tables_;
  std::vector<runtime::SeqChunk> chunks_;
};

// One step as Engine::RunStep runs it: BeginStep(graph) -> Forward -> EndStep, or AbortStep
// after a failed forward.
Status RunStep(VariantBackend& backend, LlamaModel& model, const Batch& batch, PagedKvCache& cache, bool graph) {
  TANDEM_RETURN_IF_ERROR(backend.BeginStep(graph));
  StatusOr<runtime::Tensor> logits = model.Forward(batch.chunks(), cache);
  if (!logits.ok()) {
    backend.AbortStep();
    return logits.status();
  }
  return backend.EndStep();
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    cudaEventCreate(&a);
    cudaEventCreate(&b);
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

// Median milliseconds of `reps` runs of `fn` (each timed with events), after `warm` runs.
template <typename Fn>
double MedianMs(cudaStream_t s, int warm, int reps, Fn fn) {
  for (int i = 0; i < warm; ++i) fn();
  CHECK_OK(cuda::CudaStatus(cudaStreamSynchronize(s), "sync"));
  Timer t;
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(t.a, s);
    fn();
    cudaEventRecord(t.b, s);
    cudaEventSynchronize(t.b);
    float x = 0;
    cudaEventElapsedTime(&x, t.a, t.b);
    ms.push_back(x);
  }
  CHECK_OK(cuda::LastLaunchStatus("benchmark loop"));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds per step of the last graph step replayed `per_round` times back to back
// (`rounds` rounds): the GPU's time for the step, the host's work for it hidden.
double MedianReplayMs(CudaBackend& b, int rounds, int per_round) {
  cudaStream_t s = b.stream();
  CHECK_OK(b.RelaunchLastGraphStep());
  CHECK_OK(b.Synchronize());
  Timer t;
  std::vector<float> ms;
  for (int r = 0; r < rounds; ++r) {
    cudaEventRecord(t.a, s);
    for (int i = 0; i < per_round; ++i) CHECK_OK(b.RelaunchLastGraphStep());
    cudaEventRecord(t.b, s);
    cudaEventSynchronize(t.b);
    float x = 0;
    cudaEventElapsedTime(&x, t.a, t.b);
    ms.push_back(x / per_round);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Ceilings {
  double read_gbs = 0;     // streaming read of 4 GiB
  double gemv_gbs = 0;     // decode-shaped GEMV through cuBLAS
  double gemm_tflops = 0;  // cuBLAS bf16 GEMM 8192^3
};

Ceilings MeasureCeilings(CudaBackend& b) {
  cudaStream_t s = b.stream();
  Ceilings c;
  {  // HBM read bandwidth: the streaming-read kernel over 4 GiB.
    const size_t bytes = size_t{4} << 30;
    Buffer buf = Must(b.Allocate(DType::kBF16, {static_cast<int64_t>(bytes / 2)}));
    Buffer sink = Must(b.Allocate(DType::kU8, {4096 * 16 * 4}));
    Fill(b, buf, 0.f, 1.f);
    const double ms =
        MedianMs(s, 3, 20, [&] { CHECK_OK(LaunchStreamingRead(buf.tensor().data, bytes, sink.tensor().data, s)); });
    c.read_gbs = bytes / (ms * 1e-3) / 1e9;
  }
  {  // cuBLAS bf16 GEMM 8192^3 on random data.
    const int64_t d = 8192;
    Buffer x = Must(b.Allocate(DType::kBF16, {d, d})), wt = Must(b.Allocate(DType::kBF16, {d, d}));
    Buffer y = Must(b.Allocate(DType::kBF16, {d, d}));
    Fill(b, x, 0.f, 1.f);
    Fill(b, wt, 0.f, 1.f);
    auto h = Must(cuda::CublasHandle::Create());
    cuda::GemmParams g{.x = x.tensor().data, .w = wt.tensor().data, .y = y.tensor().data, .m = d, .n = d, .k = d};
    const double ms = MedianMs(s, 3, 15, [&] { CHECK_OK(cuda::GemmBf16(h, g, s)); });
    c.gemm_tflops = 2.0 * d * d * d / (ms * 1e-3) / 1e12;
  }
  // HBM read as PERFORMANCE.md's reference measures it, a decode-shaped GEMV through cuBLAS
  // (bf16 1x4096 . 4096x28672, the gate/up shape), two weight copies in turn (470 MB, far
  // above L2). A single 235 MB kernel reads slower than the 4 GiB streaming read (its ramp and
  // tail are a larger share), so decode ratios against it are higher: both are printed.
  {
    const int64_t n = 2 * kFfn, k = kHidden;
    Buffer x = Must(b.Allocate(DType::kBF16, {1, k})), y = Must(b.Allocate(DType::kBF16, {1, n}));
    Buffer w0 = Must(b.Allocate(DType::kBF16, {n, k})), w1 = Must(b.Allocate(DType::kBF16, {n, k}));
    Fill(b, x, 0.f, 1.f);
    Fill(b, w0, 0.f, 1.f);
    Fill(b, w1, 0.f, 1.f);
    auto h = Must(cuda::CublasHandle::Create());
    constexpr int kBackToBack = 10;  // per timed sample: launch gaps hidden, as in a decode step
    const double ms = MedianMs(s, 1, 15, [&] {
      for (int i = 0; i < kBackToBack; ++i) {
        cuda::GemmParams g{
            .x = x.tensor().data, .w = (i % 2 ? w1 : w0).tensor().data, .y = y.tensor().data, .m = 1, .n = n, .k = k};
        CHECK_OK(cuda::GemmBf16(h, g, s));
      }
    });
    c.gemv_gbs = kBackToBack * static_cast<double>(n) * k * 2 / (ms * 1e-3) / 1e9;
  }
  std::printf(
      "ceilings: HBM read %.0f GB/s (streaming read, 4 GiB); decode-shaped GEMV %.0f GB/s (cuBLAS 1x4096 . "
      "4096x28672); bf16 GEMM 8192^3 %.0f TFLOP/s\n",
      c.read_gbs, c.gemv_gbs, c.gemm_tflops);
  return c;
}

struct Row {
  std::string what;
  double ms, per_s, floor_ms, ratio;
};

struct SwapRow {
  std::string what;
  double gbs, ceiling;
};

// KV swap: 512 blocks (32 layers x 64 KiB each = 1 GiB) out to pinned host and back in, in
// runs of consecutive blocks and scattered, against one pinned copy of the same size.
std::vector<SwapRow> MeasureSwaps(CudaBackend& b, const PagedKvCache& cache) {
  const int nb = 512;
  const double bytes = static_cast<double>(nb) * cache.layout().BytesPerBlockLayer() * kLayers;
  auto tiers = Must(cuda::CudaKvTierStorage::Create(cache.pool().data, cache.layout(), nb, b.stream()));
  using kv_cache::BlockCopy;
  using kv_cache::KvTier;
  std::vector<BlockCopy> out, in, scattered, scattered_in;
  for (int i = 0; i < nb; ++i) {
    out.push_back({KvTier::kDevice, i, KvTier::kHost, i});
    in.push_back({KvTier::kHost, i, KvTier::kDevice, nb + i});
    scattered.push_back({KvTier::kDevice, 2 * i, KvTier::kHost, (i * 7) % nb});
    scattered_in.push_back({KvTier::kHost, (i * 7) % nb, KvTier::kDevice, 2 * i + 1});
  }
  auto wall_gbs = [&](auto fn) {
    std::vector<double> t;
    for (int r = 0; r < 6; ++r) {
      CHECK_OK(b.Synchronize());
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      CHECK_OK(tiers->Synchronize());
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return bytes / t[t.size() / 2] / 1e9;
  };
  auto pinned = [&](cudaMemcpyKind kind) {
    void* host = tiers->HostBlock(0, 0);
    void* dev = cache.pool().data;
    return wall_gbs([&] {
      CHECK_OK(cuda::CudaStatus(
          cudaMemcpyAsync(kind == cudaMemcpyDeviceToHost ? host : dev, kind == cudaMemcpyDeviceToHost ? dev : host,
                          static_cast<size_t>(bytes), kind, tiers->copy_stream()),
          "pinned copy"));
    });
  };
  const double d2h = pinned(cudaMemcpyDeviceToHost), h2d = pinned(cudaMemcpyHostToDevice);
  return {{"swap out 512 blocks (runs)", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(out)); }), d2h},
          {"swap in 512 blocks (runs)", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(in)); }), h2d},
          {"swap out 512 scattered blocks", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(scattered)); }), d2h},
          {"swap in 512 scattered blocks", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(scattered_in)); }), h2d}};
}

struct Options {
  bool quick = false;
  bool decode_only = false;
  bool timeline = false;
  int repeat = 1;  // --decode-only rounds
  int reps = 30;   // timed steps per decode row
};

int Run(const Options& opt) {
  bool timeline_on = false;
  if (opt.timeline) {
    const Status t = EnableKernelTimeline();
    if (!t.ok()) std::printf("kernel timeline unavailable (%s): step times only\n", t.ToString().c_str());
    timeline_on = t.ok();
  }
  auto backend = Must(CudaBackend::Create());
  CudaBackend& b = *backend;
  VariantBackend variants(&b);
  cudaStream_t s = b.stream();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const Ceilings ceilings = MeasureCeilings(b);

  // The model as the engine sizes it for this GPU's runs (scheduler limits of 256 sequences
  // and the longest prefill below as the token budget).
  const int max_ctx = opt.quick ? 1024 : 8192;
  size_t streamed = 0;
  runtime::LlamaWeights weights = RandomWeights(b, &streamed);
  runtime::RuntimeOptions ro;
  ro.max_num_tokens = max_ctx;
  ro.max_num_seqs = 256;
  ro.max_logits_rows = 256;
  ro.kv_block_size = kBlock;
  ro.pad_decode_batches = true;
  std::unique_ptr<LlamaModel> model =
      Must(LlamaModel::CreateWithWeights(LlamaConfig(), std::move(weights), &variants, ro));
  const int64_t kv_tokens = opt.quick ? 256 * 1024 : 64 * 8192;  // the largest decode config that fits
  const int num_blocks = static_cast<int>(kv_tokens / kBlock);
  PagedKvCache cache = Must(PagedKvCache::Create(&b, model->KvLayoutFor(num_blocks)));
  CHECK_OK(LaunchFillRandomBf16(static_cast<__nv_bfloat16*>(cache.pool().data), cache.pool().NumBytes() / 2, g_seed++,
                                0.f, 1.f, s));
  CHECK_OK(b.Synchronize());
  const double kv_token_bytes = static_cast<double>(cache.layout().BytesPerToken());
  std::printf("weights streamed per decode step: %.3f GB; KV pool %.1f GB (%d blocks of %d)\n", streamed / 1e9,
              cache.layout().TotalBytes() / 1e9, num_blocks, kBlock);
  auto decode_floor_ms = [&](int bs, int ctx) {
    return (streamed + static_cast<double>(bs) * ctx * kv_token_bytes) / (ceilings.read_gbs * 1e9) * 1e3;
  };

  if (opt.timeline) {
    for (auto [bs, ctx] : std::vector<std::pair<int, int>>{{1, 1024}, {1, 8192}, {8, 1024}, {8, 8192}}) {
      const Batch batch(bs, 1, ctx, ctx / kBlock);
      const double ms = MedianMs(s, 3, 10, [&] { CHECK_OK(RunStep(variants, *model, batch, cache, true)); });
      const double gpu = MedianReplayMs(b, 5, 10);
      const double floor_ms = decode_floor_ms(bs, ctx);
      const std::string what = "b=" + std::to_string(bs) + " ctx=" + std::to_string(ctx);
      std::printf("\n%s traced: graph %.3f ms, replays %.3f ms, floor %.3f ms (%.3f of it)\n", what.c_str(), ms, gpu,
                  floor_ms, floor_ms / gpu);
      if (timeline_on) CHECK_OK(PrintReplayTimeline([&] { return b.RelaunchLastGraphStep(); }, what));
    }
    return 0;
  }

  std::vector<Row> rows;
  auto add = [&](const std::string& what, double ms, int tokens, double floor_ms) {
    rows.push_back({what, ms, tokens / (ms * 1e-3), floor_ms, floor_ms / ms});
  };
  const std::vector<int> batches = opt.decode_only ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 64, 256};
  const std::vector<int> contexts = opt.quick ? std::vector<int>{1024} : std::vector<int>{1024, 8192};
  for (int round = 0; round < (opt.decode_only ? opt.repeat : 1); ++round) {
    for (int ctx : contexts) {
      for (int bs : batches) {
        const std::string what = "decode b=" + std::to_string(bs) + " ctx=" + std::to_string(ctx);
        if (static_cast<int64_t>(bs) * ctx > kv_tokens) {
          std::printf("%-24s skipped: KV %.0f GB does not fit next to the weights\n", what.c_str(),
                      bs * ctx * kv_token_bytes / 1e9);
          continue;
        }
        const Batch batch(bs, 1, ctx, ctx / kBlock);
        auto graph_step = [&] { CHECK_OK(RunStep(variants, *model, batch, cache, true)); };
        // Each step of `variant`, timed alone (the host's work for it included).
        auto time_variant = [&](OpVariant variant, int reps) {
          variants.set_variant(variant);
          const double ms = MedianMs(s, 3, reps, graph_step);
          variants.set_variant(OpVariant::kServer);
          return ms;
        };
        const double floor_ms = decode_floor_ms(bs, ctx);
        add(what + " (graph)", MedianMs(s, 3, bs * ctx >= 64 * 8192 ? 10 : opt.reps, graph_step), bs, floor_ms);
        if (bs * ctx < 64 * 8192) {
          // The row above times each step alone: the host plans, uploads and records it (the GPU
          // idle), then the graph runs. Back to back, the GPU's own time per step.
          add(what + " (graph replays)", MedianReplayMs(b, 7, 10), bs, floor_ms);
          // The host's share of the difference, each step after the previous one has finished.
          std::vector<double> host_us;
          for (int i = 0; i < 21; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            graph_step();
            host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
            CHECK_OK(b.Synchronize());
          }
          std::sort(host_us.begin(), host_us.end());
          std::printf("host %s: plan + upload + recording + graph launch %.1f us (median of 21)\n", what.c_str(),
                      host_us[10]);
        }
        if (bs <= 8) {  // the fused SiLU-mul against its kernel, same run
          add(what + " (SiLU as a kernel)", time_variant(OpVariant::kSiluKernel, opt.reps), bs, floor_ms);
          // The last graph launched is that variant's.
          if (bs == 1) add(what + " (SiLU as a kernel) replays", MedianReplayMs(b, 7, 10), bs, floor_ms);
        }
        if (bs <= 8 && !opt.decode_only) {
          add(what + " (RoPE unfused)", time_variant(OpVariant::kUnfusedRope, 30), bs, floor_ms);
        }
        if (bs == 1 && !opt.decode_only) {
          add(what + " (eager)", MedianMs(s, 2, 10, [&] { CHECK_OK(RunStep(variants, *model, batch, cache, false)); }),
              bs, floor_ms);
        }
        if (bs == 1 && ctx == 1024) {
          // Attribution: the GEMMs alone (floor: weights only), and everything but attention.
          const double weights_floor_ms = streamed / (ceilings.read_gbs * 1e9) * 1e3;
          add("  b=1 GEMMs only (graph)", time_variant(OpVariant::kGemmsOnly, opt.reps), 1, weights_floor_ms);
          add("  b=1 all but attention", time_variant(OpVariant::kNoAttention, opt.reps), 1, weights_floor_ms);
        }
      }
    }
  }
  std::vector<int> prefills = opt.quick ? std::vector<int>{512} : std::vector<int>{512, 2048, 4096, 8192};
  if (opt.decode_only) prefills.clear();
  for (int t : prefills) {
    const Batch batch(1, t, t, t / kBlock);
    const double ms = MedianMs(s, 1, 5, [&] { CHECK_OK(RunStep(variants, *model, batch, cache, false)); });
    const double layer_params = static_cast<double>(kQkv + kHeads * kHeadDim + 3.0 * kFfn) * kHidden;
    const double flops = 2.0 * t * kLayers * layer_params +
                         2.0 * static_cast<double>(t) * t * kHeadDim * kHeads * kLayers + 2.0 * kHidden * kVocab;
    add("prefill " + std::to_string(t), ms, t, flops / (ceilings.gemm_tflops * 1e12) * 1e3);
  }
  const std::vector<SwapRow> swaps = opt.decode_only ? std::vector<SwapRow>{} : MeasureSwaps(b, cache);

  std::printf("\ngraphs captured %d, replays %d\n", b.graphs_captured(), b.graph_replays());
  std::printf("\n%-30s %10s %12s %10s %8s %8s\n", "step", "ms", "tokens/s", "floor ms", "ratio", "/GEMV");
  for (const Row& r : rows) {
    std::printf("%-30s %10.3f %12.0f %10.3f %8.3f", r.what.c_str(), r.ms, r.per_s, r.floor_ms, r.ratio);
    if (r.what.rfind("prefill", 0) == 0) {
      std::printf("\n");
    } else {  // the same floor over the decode-shaped GEMV's read rate instead
      std::printf(" %8.3f\n", r.ratio * ceilings.read_gbs / ceilings.gemv_gbs);
    }
  }
  std::printf(
      "(decode floor: (weights streamed + KV read) / HBM read (streaming read; /GEMV: over the decode-shaped "
      "GEMV's rate); prefill floor: model FLOPs / GEMM rate)\n");
  std::printf("\n%-32s %10s %14s %8s\n", "KV host tier", "GB/s", "pinned GB/s", "ratio");
  for (const SwapRow& r : swaps) {
    std::printf("%-32s %10.1f %14.1f %8.3f\n", r.what.c_str(), r.gbs, r.ceiling, r.gbs / r.ceiling);
  }
  return 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  tandem::bench::Options opt;
  for (int i = 1; i < argc; ++i) {
    opt.timeline |= std::strcmp(argv[i], "--timeline") == 0;
    opt.quick |= std::strcmp(argv[i], "--quick") == 0;
    opt.decode_only |= std::strcmp(argv[i], "--decode-only") == 0;
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) opt.repeat = std::max(1, std::atoi(argv[++i]));
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) opt.reps = std::max(1, std::atoi(argv[++i]));
  }
  if (tandem::cuda::DeviceCount() == 0) {
    std::printf("model_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  return tandem::bench::Run(opt);
}
