// Decode attention bandwidth on the Llama-3-8B layer shape (and a head_dim-64 variant),
// as a ratio to a device-to-device copy and to a plain streaming-read kernel measured in
// the same run; plus prefill attention TFLOP/s and sampler time for reference.
// Writes one CSV row per decode shape (--csv PATH) for bench/kernels/sdpa_compare.py.
//
//   decode_attention_bench [--csv decode.csv] [--quick] [--reps N] [--in-order]
//                          [--jitter J] [--shape BATCH,CTX,HQ,HKV,HD,BS[,STAGES[,SPLITS]]]...
// --shape (repeatable) runs only the shapes given (decode only: no sweep, prefill or sampler);
// STAGES and SPLITS, when given and > 0, replace the kernel's pipeline depth and the plan's
// split count (a split count sets the tiles per work item at fixed bytes);
// --in-order gives every sequence consecutive cache blocks instead of shuffled ones.
// --jitter J gives the sequences mixed lengths of the same total: pairs of sequences at
// CTX + 64d and CTX - 64d tokens, d drawn uniformly from [-J, J] (J < CTX / 64).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/streaming_read.h"
#include "bench/kernels/bench_util.h"
#include "common/base/dtype.h"
#include "common/cuda/cuda_status.h"
#include "common/cuda/device_buffer.h"
#include "common/cuda/stream.h"
#include "common/kernels/decode_attention.h"
#include "common/kernels/prefill_attention.h"
#include "common/kernels/logprobs.h"
#include "common/kernels/sampling.h"
#include "common/kernels/token_mask.h"

namespace tandem {
namespace {

using bench::Alloc;
using cuda::DeviceBuffer;

// Median milliseconds of `reps` timed runs after `warmup` untimed ones.
float MedianMs(const std::function<void()>& fn, int warmup, int reps, cudaStream_t stream) {
  for (int i = 0; i < warmup; ++i) fn();
  auto start = cuda::CudaEvent::Create(), stop = cuda::CudaEvent::Create();
  BENCH_OK(start.status());
  BENCH_OK(stop.status());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    BENCH_OK(start->Record(stream));
    fn();
    BENCH_OK(stop->Record(stream));
    BENCH_OK(stop->Synchronize());
    auto t = cuda::CudaEvent::ElapsedMs(*start, *stop);
    BENCH_OK(t.status());
    ms.push_back(*t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Fills a buffer with random bf16 values in [-2, 2) (never zeros).
void FillRandomBf16(DeviceBuffer& buf, uint32_t seed) {
  std::vector<uint16_t> host(std::min<size_t>(buf.size_bytes() / 2, size_t{1} << 24));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  for (auto& x : host) x = F32ToBF16(dist(rng));
  size_t done = 0;
  const size_t total = buf.size_bytes();
  while (done < total) {
    const size_t n = std::min(total - done, host.size() * 2);
    BENCH_OK(cuda::CudaStatus(cudaMemcpy(buf.as<char>() + done, host.data(), n, cudaMemcpyHostToDevice), "fill"));
    done += n;
  }
}

struct Ceilings {
  double copy_gbs = 0;  // device-to-device copy, bytes read + written
  double read_gbs = 0;  // streaming-read kernel
};

Ceilings MeasureCeilings(cudaStream_t stream) {
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer a = Alloc(bytes), b = Alloc(bytes), sink = Alloc(1 << 20);
  FillRandomBf16(a, 1);
  Ceilings c;
  float ms =
      MedianMs([&] { cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream); }, 3, 15, stream);
  c.copy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
  ms = MedianMs([&] { BENCH_OK(bench::LaunchStreamingRead(a.data(), bytes, sink.data(), stream)); }, 3, 15, stream);
  c.read_gbs = bytes / (ms * 1e-3) / 1e9;
  return c;
}

struct DecodeShape {
  int batch, ctx, hq, hkv, hd, bs;
  int stages = 0;  // 0: the kernel's default pipeline depth (these rows also go to the CSV)
  int splits = 0;  // 0: the plan's split count
};

struct DecodeOptions {
  int reps = 20;
  bool in_order = false;  // consecutive blocks per sequence (default: shuffled)
  int jitter = 0;         // mixed lengths: +-64 * [0, jitter] tokens around ctx, in pairs
};

// Context lengths of `batch` sequences around `ctx`: pairs at ctx + 64d and ctx - 64d with d
// uniform in [-jitter, jitter] (an odd last sequence keeps ctx), so the total is batch * ctx.
std::vector<int32_t> ContextLens(int batch, int ctx, int jitter) {
  std::vector<int32_t> lens(batch, ctx);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> dist(-jitter, jitter);
  for (int i = 0; i + 1 < batch; i += 2) {
    const int d = 64 * dist(rng);
    lens[i] = ctx + d;
    lens[i + 1] = ctx - d;
  }
  return lens;
}

void BenchDecode(const std::vector<DecodeShape>& shapes, const Ceilings& ceil, int num_sms, const DecodeOptions& opt,
                 cudaStream_t stream, FILE* csv) {
  std::printf("\n%-6s %-6s %-4s %-4s %-4s %-3s %-3s %-7s %-9s %-9s %-6s %-7s %-7s\n", "batch", "ctx", "hq", "hkv", "hd",
              "bs", "st", "splits", "KV_MB", "time_us", "GB/s", "/copy", "/read");
  if (csv) std::fprintf(csv, "batch,ctx,hq,hkv,hd,bs,kv_bytes,time_us,gbs,copy_gbs,read_gbs\n");
  for (const auto& s : shapes) {
    if (64 * opt.jitter >= s.ctx) {
      std::fprintf(stderr, "--jitter %d: lengths %d +- %d would not be positive, shape skipped\n", opt.jitter, s.ctx,
                   64 * opt.jitter);
      continue;
    }
    const int max_ctx = s.ctx + 64 * opt.jitter;
    const int blocks_per_seq = (max_ctx + s.bs - 1) / s.bs;
    const int64_t num_blocks = static_cast<int64_t>(s.batch) * blocks_per_seq;
    const size_t block_bytes = 2ull * s.hkv * s.bs * s.hd * 2;
    DeviceBuffer pool = Alloc(num_blocks * block_bytes);
    FillRandomBf16(pool, 2);
    std::vector<int32_t> table(num_blocks);
    std::iota(table.begin(), table.end(), 0);
    if (!opt.in_order) std::shuffle(table.begin(), table.end(), std::mt19937(3));  // scattered blocks
    const std::vector<int32_t> lens = ContextLens(s.batch, s.ctx, opt.jitter);
    DeviceBuffer dtable = Alloc(table.size() * 4), dlens = Alloc(lens.size() * 4);
    BENCH_OK(cuda::CudaStatus(cudaMemcpy(dtable.data(), table.data(), table.size() * 4, cudaMemcpyHostToDevice), "t"));
    BENCH_OK(cuda::CudaStatus(cudaMemcpy(dlens.data(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice), "l"));
    DeviceBuffer q = Alloc(static_cast<size_t>(s.batch) * s.hq * s.hd * 2);
    DeviceBuffer out = Alloc(static_cast<size_t>(s.batch) * s.hq * s.hd * 2);
    FillRandomBf16(q, 4);
    kernels::DecodeAttentionParams p;
    p.q = q.as<__nv_bfloat16>();
    p.kv_cache = pool.as<__nv_bfloat16>();
    p.block_tables = dtable.as<int32_t>();
    p.context_lens = dlens.as<int32_t>();
    p.out = out.as<__nv_bfloat16>();
    p.num_seqs = s.batch;
    p.num_q_heads = s.hq;
    p.num_kv_heads = s.hkv;
    p.head_dim = s.hd;
    p.block_size = s.bs;
    p.max_blocks_per_seq = blocks_per_seq;
    p.max_context_len = max_ctx;
    p.softmax_scale = 1.f / std::sqrt(static_cast<float>(s.hd));
    auto plan = kernels::PlanDecodeAttention(p, num_sms);
    BENCH_OK(plan.status());
    p.num_splits = s.splits > 0 ? s.splits : plan->num_splits;
    DeviceBuffer ws = Alloc(std::max<size_t>(kernels::DecodeAttentionWorkspaceBytes(p), 16));
    p.num_stages = s.stages;
    p.workspace = ws.as<float>();
    const float ms = MedianMs([&] { BENCH_OK(kernels::LaunchDecodeAttention(p, stream)); }, 3, opt.reps, stream);
    const double kv_bytes = static_cast<double>(s.batch) * s.ctx * block_bytes / s.bs;
    const double gbs = kv_bytes / (ms * 1e-3) / 1e9;
    std::printf("%-6d %-6d %-4d %-4d %-4d %-3d %-3d %-7d %-9.1f %-9.1f %-6.0f %-7.3f %-7.3f\n", s.batch, s.ctx, s.hq,
                s.hkv, s.hd, s.bs, s.stages, p.num_splits, kv_bytes / 1e6, ms * 1e3, gbs, gbs / ceil.copy_gbs,
                gbs / ceil.read_gbs);
    if (csv && s.stages == 0 && s.splits == 0)
      std::fprintf(csv, "%d,%d,%d,%d,%d,%d,%.0f,%.3f,%.1f,%.1f,%.1f\n", s.batch, s.ctx, s.hq, s.hkv, s.hd, s.bs,
                   kv_bytes, ms * 1e3, gbs, ceil.copy_gbs, ceil.read_gbs);
  }
}

void BenchPrefill(const std::vector<int>& lens, cudaStream_t stream) {
  const int hq = 32, hkv = 8, hd = 128, bs = 16;
  std::printf("\n%-8s %-10s %-8s   (prefill attention, 1 sequence, causal, Hq 32 / Hkv 8 / hd 128)\n", "tokens",
              "time_us", "TFLOP/s");
  for (int n : lens) {
    const int blocks = (n + bs - 1) / bs;
    DeviceBuffer pool = Alloc(static_cast<size_t>(blocks) * 2 * hkv * bs * hd * 2);
    DeviceBuffer q = Alloc(static_cast<size_t>(n) * hq * hd * 2), out = Alloc(static_cast<size_t>(n) * hq * hd * 2);
    FillRandomBf16(pool, 5);
    FillRandomBf16(q, 6);
    std::vector<int32_t> table(blocks), cu{0, n}, ctx{n};
    std::iota(table.begin(), table.end(), 0);
    DeviceBuffer dt = Alloc(blocks * 4), dcu = Alloc(8), dctx = Alloc(4);
    cudaMemcpy(dt.data(), table.data(), blocks * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dcu.data(), cu.data(), 8, cudaMemcpyHostToDevice);
    cudaMemcpy(dctx.data(), ctx.data(), 4, cudaMemcpyHostToDevice);
    kernels::PrefillAttentionParams p;
    p.q = q.as<__nv_bfloat16>();
    p.kv_cache = pool.as<__nv_bfloat16>();
    p.block_tables = dt.as<int32_t>();
    p.cu_q_lens = dcu.as<int32_t>();
    p.context_lens = dctx.as<int32_t>();
    p.out = out.as<__nv_bfloat16>();
    p.num_seqs = 1;
    p.num_q_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = hd;
    p.block_size = bs;
    p.max_blocks_per_seq = blocks;
    p.max_q_len = n;
    p.softmax_scale = 1.f / std::sqrt(128.f);
    const float ms = MedianMs([&] { BENCH_OK(kernels::LaunchPrefillAttention(p, stream)); }, 2, 10, stream);
    const double flops = 4.0 * hd * hq * (static_cast<double>(n) * (n + 1) / 2);  // causal
    std::printf("%-8d %-10.1f %-8.1f\n", n, ms * 1e3, flops / (ms * 1e-3) / 1e12);
  }
}

void BenchSampling(const Ceilings& ceil, cudaStream_t stream) {
  const int vocab = 128256;
  std::printf("\n%-6s %-10s %-10s %-10s %-10s %-8s %-10s   (vocab 128256, fp32 logits; logprobs: token + top k;"
              " mask: structured output's token masks, pinned upload + apply, 1 %% of tokens allowed)\n",
              "rows", "argmax_us", "sample_us", "lp0_us", "lp20_us", "lp20/read", "mask_us");
  for (int rows : {1, 64, 256}) {
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.f, 2.f);
    for (auto& x : logits) x = dist(rng);
    DeviceBuffer dl = Alloc(logits.size() * 4), out = Alloc(rows * 4);
    cudaMemcpy(dl.data(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice);
    std::vector<float> temp(rows, 0.8f), top_p(rows, 0.9f), min_p(rows, 0.f);
    std::vector<int32_t> top_k(rows, 50);
    std::vector<uint64_t> seeds(rows, 1), offs(rows, 0);
    DeviceBuffer dt = Alloc(rows * 4), dp = Alloc(rows * 4), dm = Alloc(rows * 4), dk = Alloc(rows * 4);
    DeviceBuffer ds = Alloc(rows * 8), doff = Alloc(rows * 8);
    cudaMemcpy(dt.data(), temp.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dp.data(), top_p.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dm.data(), min_p.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dk.data(), top_k.data(), rows * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(ds.data(), seeds.data(), rows * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(doff.data(), offs.data(), rows * 8, cudaMemcpyHostToDevice);
    kernels::ArgmaxParams ap{dl.as<float>(), vocab, out.as<int32_t>(), rows, vocab};
    const float am = MedianMs([&] { BENCH_OK(kernels::LaunchArgmax(ap, stream)); }, 2, 10, stream);
    kernels::SamplingParams sp{dl.as<float>(), vocab,          out.as<int32_t>(), dt.as<float>(),      dk.as<int32_t>(),
                               dp.as<float>(), dm.as<float>(), ds.as<uint64_t>(), doff.as<uint64_t>(), rows,
                               vocab};
    const float sm = MedianMs([&] { BENCH_OK(kernels::LaunchSampling(sp, stream)); }, 2, 10, stream);
    // Logprobs over the same rows: the sampled token's and the top k, (1 + 20) entries per row.
    DeviceBuffer dnum = Alloc(rows * 4), dlp = Alloc(static_cast<size_t>(rows) * 21 * sizeof(kernels::LogprobEntry));
    auto logprobs_ms = [&](int k) {
      std::vector<int32_t> num_top(rows, k);
      cudaMemcpy(dnum.data(), num_top.data(), rows * 4, cudaMemcpyHostToDevice);
      kernels::LogprobsParams lp;
      lp.logits = dl.as<float>();
      lp.logits_stride = vocab;
      lp.temperature = dt.as<float>();
      lp.tokens = out.as<int32_t>();
      lp.num_top = dnum.as<int32_t>();
      lp.max_top = 20;
      lp.out = dlp.as<kernels::LogprobEntry>();
      lp.num_rows = rows;
      lp.vocab = vocab;
      return MedianMs([&] { BENCH_OK(kernels::LaunchLogprobs(lp, stream)); }, 2, 10, stream);
    };
    const float lp0 = logprobs_ms(0), lp20 = logprobs_ms(20);
    const double read_gbs = static_cast<double>(rows) * vocab * 4 / (lp20 * 1e-3) / 1e9;
    // Every row masked, as the sampler stages it: row ids and masks up in one copy, then the kernel.
    const int words = (vocab + 31) / 32;
    const size_t mask_bytes = static_cast<size_t>(rows) * (1 + words) * 4;
    uint32_t* host_masks = nullptr;
    BENCH_OK(cuda::CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&host_masks), mask_bytes), "cudaMallocHost"));
    for (int r = 0; r < rows; ++r) host_masks[r] = static_cast<uint32_t>(r);
    std::bernoulli_distribution allow(0.01);
    for (size_t w = rows; w < static_cast<size_t>(rows) * (1 + words); ++w) {
      uint32_t bits = 0;
      for (int b = 0; b < 32; ++b) bits |= allow(rng) ? 1u << b : 0u;
      host_masks[w] = bits;
    }
    DeviceBuffer dmask = Alloc(mask_bytes);
    kernels::TokenMaskParams mp;
    mp.logits = dl.as<float>();
    mp.logits_stride = vocab;
    mp.num_logits_rows = rows;
    mp.vocab = vocab;
    mp.rows = dmask.as<int32_t>();
    mp.masks = reinterpret_cast<const uint32_t*>(dmask.as<int32_t>() + rows);
    mp.num_rows = rows;
    mp.mask_words = words;
    const float mk = MedianMs(
        [&] {
          BENCH_OK(cuda::CudaStatus(cudaMemcpyAsync(dmask.data(), host_masks, mask_bytes, cudaMemcpyHostToDevice, stream),
                                    "cudaMemcpyAsync"));
          BENCH_OK(kernels::LaunchApplyTokenMask(mp, stream));
        },
        2, 10, stream);
    cudaFreeHost(host_masks);
    std::printf("%-6d %-10.1f %-10.1f %-10.1f %-10.1f %-8.2f %-10.1f   (top_k 50, top_p 0.9, T 0.8)\n", rows, am * 1e3,
                sm * 1e3, lp0 * 1e3, lp20 * 1e3, read_gbs / ceil.read_gbs, mk * 1e3);
  }
}

int Main(int argc, char** argv) {
  const char* csv_path = nullptr;
  bool quick = false;
  bool sampling_only = false;
  DecodeOptions opt;
  std::vector<DecodeShape> only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--sampling")) {
      sampling_only = true;
    } else if (!std::strcmp(argv[i], "--in-order")) {
      opt.in_order = true;
    } else if (!std::strcmp(argv[i], "--jitter") && i + 1 < argc) {
      opt.jitter = std::max(0, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      opt.reps = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      DecodeShape s{};
      if (std::sscanf(argv[++i], "%d,%d,%d,%d,%d,%d,%d,%d", &s.batch, &s.ctx, &s.hq, &s.hkv, &s.hd, &s.bs, &s.stages,
                      &s.splits) < 6) {
        std::fprintf(stderr, "--shape wants BATCH,CTX,HQ,HKV,HD,BS[,STAGES[,SPLITS]], got %s\n", argv[i]);
        return 2;
      }
      only.push_back(s);
    } else {
      std::fprintf(stderr, "unknown argument %s (see the comment at the top of the source)\n", argv[i]);
      return 2;
    }
  }
  if (cuda::DeviceCount() == 0) {
    std::printf("decode_attention_bench: no CUDA GPU, nothing to measure\n");
    return 0;
  }
  cudaDeviceProp prop{};
  BENCH_OK(cuda::CudaStatus(cudaGetDeviceProperties(&prop, 0), "props"));
  auto stream = cuda::CudaStream::Create();
  BENCH_OK(stream.status());
  const Ceilings ceil = MeasureCeilings(stream->get());
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  std::printf("ceilings: D2D copy %.0f GB/s (read+write), streaming read %.0f GB/s\n", ceil.copy_gbs, ceil.read_gbs);
  if (sampling_only) {
    BenchSampling(ceil, stream->get());
    return 0;
  }
  std::vector<DecodeShape> shapes = {
      {1, 1024, 32, 8, 128, 16},  {1, 32768, 32, 8, 128, 16}, {8, 8192, 32, 8, 128, 16},   {8, 32768, 32, 8, 128, 16},
      {64, 1024, 32, 8, 128, 16}, {64, 4096, 32, 8, 128, 16}, {256, 1024, 32, 8, 128, 16}, {256, 4096, 32, 8, 128, 16},
      {64, 4096, 32, 8, 128, 64}, {64, 4096, 32, 8, 128, 32}, {64, 4096, 32, 32, 128, 16}, {64, 8192, 16, 8, 64, 16},
      {64, 4096, 64, 8, 128, 16}};
  if (quick) shapes.resize(3);
  if (!only.empty()) shapes = only;
  for (int st : {2, 4}) {  // pipeline-depth sweep (stdout only)
    if (!only.empty()) break;
    for (DecodeShape s : {DecodeShape{1, 32768, 32, 8, 128, 16}, DecodeShape{64, 4096, 32, 8, 128, 16},
                          DecodeShape{256, 1024, 32, 8, 128, 16}}) {
      s.stages = st;
      shapes.push_back(s);
    }
  }
  FILE* csv = csv_path ? std::fopen(csv_path, "w") : nullptr;
  BenchDecode(shapes, ceil, prop.multiProcessorCount, opt, stream->get(), csv);
  if (csv) std::fclose(csv);
  if (!only.empty()) return 0;
  BenchPrefill(quick ? std::vector<int>{512} : std::vector<int>{512, 2048, 4096, 8192}, stream->get());
  BenchSampling(ceil, stream->get());
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Main(argc, argv); }
