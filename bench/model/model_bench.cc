// Whole-model benchmark of the CUDA backend at the Llama-3-8B shape (32 layers, hidden
// 4096, 32 query / 8 KV heads of 128, FFN 14336, vocab 128256, bf16), random weights and
// KV generated on the GPU (no checkpoint file). It runs the op sequence of
// LlamaModel::RunLayer (RMSNorm -> fused QKV GEMM -> RoPE + paged KV write and paged
// attention (one kernel in decode steps) -> o GEMM added into the fp32 residual stream ->
// RMSNorm -> gate/up GEMM with SiLU-mul in its epilogue -> down GEMM added into the residual
// stream; then gather of the logits rows -> final norm -> LM head, fp32 logits) on CudaBackend.
//
// Prints, with ceilings measured in the same run (streaming-read HBM bandwidth over 4 GiB; HBM
// read as a decode-shaped cuBLAS GEMV, PERFORMANCE.md's reference; cuBLAS bf16 GEMM 8192^3):
//  - decode tokens/s at batch 1/8/64/256 x context 1K/8K, each as the ratio of its memory
//    floor (weights streamed + KV read, over the measured read bandwidth; a second column over
//    the GEMV's) to the step time
//    (each step timed alone, its host recording included: "(graph)"; and the same graph
//    replayed back to back, the GPU's time per step: "(graph replays)");
//    steps run as CUDA graphs (CudaBackend graph steps), median of many replays; at batch
//    <= 8 also with RoPE + KV write as a kernel of its own before the attention, for
//    comparison;
//  - prefill of 512/2K/4K/8K tokens: model FLOPs / time over the measured GEMM rate;
//  - KV swap through the host tier (CudaKvTierStorage: pinned memory, copy stream), 1 GiB
//    out and in, against one pinned cudaMemcpyAsync of the same size.
// Usage: model_bench [--quick] [--decode-only [--repeat N] [--reps R]] [--timeline]
//   --decode-only: only the decode
//   rows at batch 1 and 8 (1K and 8K contexts; with --quick 1K only) with their fused-op
//   comparison rows, and the b=1 attribution rows, N times over (for A/B
//   runs of two builds side by side), each the median of R graph replays (default 30).
//   --timeline: only the kernel timelines (CUPTI) of decode steps at b=1 / 8, 1K / 8K.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/gpu/fill_random.h"
#include "bench/gpu/streaming_read.h"
#include "bench/model/kernel_timeline.h"
#include "common/cuda/cuda_status.h"
#include "common/cuda/gemm.h"
#include "common/cuda/kv_tier_storage_cuda.h"
#include "common/runtime/cuda_backend.h"
#include "common/runtime/llama_weights.h"
#include "common/runtime/paged_kv_cache.h"

namespace tandem::runtime {
namespace {

constexpr int kLayers = 32, kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 14336;
constexpr int kVocab = 128256, kBlock = 16;
constexpr int kQkv = (kHeads + 2 * kKvHeads) * kHeadDim;
constexpr float kEps = 1e-5f;

#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    ::tandem::Status _s = (expr);                                               \
    if (!_s.ok()) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, _s.ToString().c_str()); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

template <typename T>
T Must(StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "error: %s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(v).value();
}

struct Model {
  model::ModelConfig config;
  LlamaWeights w;
  size_t streamed_bytes = 0;  // what a decode step reads of the weights (not the embedding)
};

struct Work {
  Buffer meta, slots, residual, normed, qkv, q, attn, gate_up, act, attn_ws, pick_r, pick_n, logits;
};

// Step metadata on the device (views of Work::meta).
struct Step {
  int n = 0, s = 0, width = 0, max_q = 0, max_kv = 0;
  Tensor ids, positions, slots, query_start, kv_lens, tables, logits_rows;
};

uint64_t g_seed = 1;

void Fill(CudaBackend& b, const Buffer& buf, float center, float spread) {
  const Tensor& t = buf.tensor();
  CHECK_OK(bench::LaunchFillRandomBf16(static_cast<__nv_bfloat16*>(t.data), t.NumBytes() / 2, g_seed++, center,
                                         spread, b.stream()));
}

Buffer Weight(CudaBackend& b, std::vector<int64_t> shape, float center, float spread, size_t* bytes) {
  Buffer buf = Must(b.Allocate(DType::kBF16, shape));
  Fill(b, buf, center, spread);
  if (bytes != nullptr) *bytes += buf.tensor().NumBytes();
  return buf;
}

Model MakeModel(CudaBackend& b) {
  Model m;
  model::ModelConfig& c = m.config;
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
  size_t* s = &m.streamed_bytes;
  for (int l = 0; l < kLayers; ++l) {
    LlamaLayerWeights L;
    L.input_norm = Weight(b, {kHidden}, 1.f, 0.1f, s);
    L.qkv_proj = Weight(b, {kQkv, kHidden}, 0.f, 0.03f, s);
    L.o_proj = Weight(b, {kHidden, kHeads * kHeadDim}, 0.f, 0.03f, s);
    L.post_attention_norm = Weight(b, {kHidden}, 1.f, 0.1f, s);
    L.gate_up_proj = Weight(b, {2 * kFfn, kHidden}, 0.f, 0.03f, s);
    L.down_proj = Weight(b, {kHidden, kFfn}, 0.f, 0.02f, s);
    m.w.layers.push_back(std::move(L));
  }
  m.w.embed_tokens = Weight(b, {kVocab, kHidden}, 0.f, 1.f, nullptr);
  m.w.final_norm = Weight(b, {kHidden}, 1.f, 0.1f, s);
  m.w.lm_head = Weight(b, {kVocab, kHidden}, 0.f, 0.03f, s);
  return m;
}

Work MakeWork(CudaBackend& b, const Model& m, int max_tokens, int max_seqs, int max_kv,
              const kv_cache::KvLayout& layout) {
  Work w;
  const int64_t t = max_tokens;
  w.meta = Must(b.Allocate(DType::kI32, {4 * t + 3 * max_seqs + 1 + static_cast<int64_t>(max_seqs) *
                                                                       ((max_kv + kBlock - 1) / kBlock + 1)}));
  w.slots = Must(b.Allocate(DType::kI64, {t}));
  w.residual = Must(b.Allocate(DType::kF32, {t, kHidden}));  // fp32 residual stream, as LlamaModel
  w.normed = Must(b.Allocate(DType::kBF16, {t, kHidden}));
  w.qkv = Must(b.Allocate(DType::kBF16, {t, kQkv}));
  w.q = Must(b.Allocate(DType::kBF16, {t, kHeads, kHeadDim}));
  w.attn = Must(b.Allocate(DType::kBF16, {t, kHeads, kHeadDim}));
  w.gate_up = Must(b.Allocate(DType::kBF16, {t, 2 * kFfn}));
  w.act = Must(b.Allocate(DType::kBF16, {t, kFfn}));
  PagedAttentionParams max_shape{.q = Tensor(nullptr, DType::kBF16, Device::kCuda, {t, kHeads, kHeadDim}),
                                 .layout = layout, .num_seqs = max_seqs, .max_query_len = max_tokens,
                                 .max_kv_len = max_kv, .scale = 1.f};
  const size_t ws = b.AttentionWorkspaceBytes(max_shape);
  if (ws > 0) w.attn_ws = Must(b.Allocate(DType::kU8, {static_cast<int64_t>(ws)}));
  w.pick_r = Must(b.Allocate(DType::kF32, {max_seqs, kHidden}));
  w.pick_n = Must(b.Allocate(DType::kBF16, {max_seqs, kHidden}));
  w.logits = Must(b.Allocate(DType::kF32, {max_seqs, kVocab}));
  return w;
}

// Uploads the metadata of `seqs` sequences, each with `q_len` new tokens ending at
// context `ctx`, sequence i in blocks [i * blocks_per_seq, ...), every sequence wanting
// logits for its last token.
Step Upload(CudaBackend& b, Work& w, int seqs, int q_len, int ctx, int blocks_per_seq) {
  Step st;
  st.n = seqs * q_len;
  st.s = seqs;
  st.width = (ctx + kBlock - 1) / kBlock;
  st.max_q = q_len;
  st.max_kv = ctx;
  std::vector<int32_t> packed;
  std::vector<int64_t> slots;
  for (int i = 0; i < seqs; ++i)
    for (int j = 0; j < q_len; ++j) packed.push_back((i * 7919 + j * 104729) % kVocab);
  for (int i = 0; i < seqs; ++i)
    for (int j = 0; j < q_len; ++j) {
      const int pos = ctx - q_len + j;
      packed.push_back(pos);
      slots.push_back(static_cast<int64_t>(i * blocks_per_seq + pos / kBlock) * kBlock + pos % kBlock);
    }
  const size_t qs_off = packed.size();
  for (int i = 0; i <= seqs; ++i) packed.push_back(i * q_len);
  const size_t kv_off = packed.size();
  for (int i = 0; i < seqs; ++i) packed.push_back(ctx);
  const size_t tab_off = packed.size();
  for (int i = 0; i < seqs; ++i)
    for (int k = 0; k < st.width; ++k) packed.push_back(i * blocks_per_seq + k);
  const size_t lr_off = packed.size();
  for (int i = 0; i < seqs; ++i) packed.push_back(i * q_len + q_len - 1);
  Tensor meta = w.meta.tensor().Rows(0, static_cast<int64_t>(packed.size()));
  CHECK_OK(b.CopyToDevice(packed.data(), packed.size() * 4, meta));
  st.slots = w.slots.tensor().Rows(0, st.n);
  CHECK_OK(b.CopyToDevice(slots.data(), slots.size() * 8, st.slots));
  st.ids = meta.Rows(0, st.n);
  st.positions = meta.Rows(st.n, st.n);
  st.query_start = meta.Rows(qs_off, seqs + 1);
  st.kv_lens = meta.Rows(kv_off, seqs);
  st.tables = meta.Rows(tab_off, static_cast<int64_t>(seqs) * st.width).Reshape({seqs, st.width});
  st.logits_rows = meta.Rows(lr_off, seqs);
  CHECK_OK(b.Synchronize());
  return st;
}

// What a step runs: everything, or parts of it (to attribute the decode step's time: each
// part drops one kind of op from every layer), or everything with a fused op as ops of
// their own: RoPE + KV write before the attention; SiLU-mul as a kernel after the gate/up
// GEMM.
enum class Part { kAll, kGemmsOnly, kNoAttention, kUnfusedRope, kSiluKernel };

// The forward of one step, op for op as LlamaModel::Forward / RunLayer.
Status Forward(CudaBackend& b, const Model& m, Work& w, const Step& st, const PagedKvCache& cache,
               Part part = Part::kAll) {
  const bool small_ops = part != Part::kGemmsOnly, attention = small_ops && part != Part::kNoAttention;
  const bool fused_silu = part != Part::kSiluKernel;
  const int64_t n = st.n;
  Tensor residual = w.residual.tensor().Rows(0, n);
  Tensor normed = w.normed.tensor().Rows(0, n), qkv = w.qkv.tensor().Rows(0, n);
  Tensor q = w.q.tensor().Rows(0, n), attn = w.attn.tensor().Rows(0, n);
  Tensor gate_up = w.gate_up.tensor().Rows(0, n), act = w.act.tensor().Rows(0, n);
  if (small_ops) TANDEM_RETURN_IF_ERROR(b.Embedding(st.ids, m.w.embed_tokens.tensor(), residual));
  RopeParams rope{.theta = 500000.0,
                  .scaling = {model::RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192}};
  // Layer 0's input norm (GEMMs only: none, the projection of whatever `normed` holds; the
  // norms after the o and down projections run there too).
  if (small_ops) {
    TANDEM_RETURN_IF_ERROR(
        b.RmsNorm({.x = residual, .weight = m.w.layers[0].input_norm.tensor(), .out = normed, .eps = kEps}));
  }
  for (int l = 0; l < kLayers; ++l) {
    const LlamaLayerWeights& L = m.w.layers[l];
    TANDEM_RETURN_IF_ERROR(b.Linear({.x = normed, .weight = L.qkv_proj.tensor(), .out = qkv}));
    const RopeKvWriteParams rope_write{.qkv = qkv, .q_out = q, .positions = st.positions, .slot_mapping = st.slots,
                                       .kv_pool = cache.pool(), .layout = cache.layout(), .layer = l, .rope = rope};
    const PagedAttentionParams attention_params{
        .q = q, .out = attn, .kv_pool = cache.pool(), .layout = cache.layout(), .layer = l,
        .query_start = st.query_start, .kv_lens = st.kv_lens, .block_tables = st.tables, .num_seqs = st.s,
        .max_query_len = st.max_q, .max_kv_len = st.max_kv, .scale = 1.f / std::sqrt(static_cast<float>(kHeadDim)),
        .workspace = w.attn_ws.tensor()};
    if (attention && part != Part::kUnfusedRope) {
      TANDEM_RETURN_IF_ERROR(b.RopeKvWriteAndAttention(rope_write, attention_params));
    } else if (small_ops) {
      TANDEM_RETURN_IF_ERROR(b.RopeKvWrite(rope_write));
      if (attention) TANDEM_RETURN_IF_ERROR(b.PagedAttention(attention_params));
    }
    TANDEM_RETURN_IF_ERROR(b.Linear({.x = attn.Reshape({n, kHeads * kHeadDim}), .weight = L.o_proj.tensor(),
                                     .out = residual, .accumulate = true}));
    TANDEM_RETURN_IF_ERROR(
        b.RmsNorm({.x = residual, .weight = L.post_attention_norm.tensor(), .out = normed, .eps = kEps}));
    if (fused_silu && small_ops) {
      TANDEM_RETURN_IF_ERROR(b.Linear({.x = normed, .weight = L.gate_up_proj.tensor(), .out = act, .silu_mul = true,
                                       .scratch = gate_up}));
    } else {
      TANDEM_RETURN_IF_ERROR(b.Linear({.x = normed, .weight = L.gate_up_proj.tensor(), .out = gate_up}));
      if (small_ops) TANDEM_RETURN_IF_ERROR(b.SiluAndMul(gate_up, act));
    }
    TANDEM_RETURN_IF_ERROR(b.Linear({.x = act, .weight = L.down_proj.tensor(), .out = residual, .accumulate = true}));
    if (l + 1 < kLayers) {
      TANDEM_RETURN_IF_ERROR(
          b.RmsNorm({.x = residual, .weight = m.w.layers[l + 1].input_norm.tensor(), .out = normed, .eps = kEps}));
    }
  }
  const int64_t r = st.s;
  Tensor pr = w.pick_r.tensor().Rows(0, r), pn = w.pick_n.tensor().Rows(0, r);
  if (small_ops) {
    TANDEM_RETURN_IF_ERROR(b.GatherRows(residual, st.logits_rows, pr));
    TANDEM_RETURN_IF_ERROR(b.RmsNorm({.x = pr, .weight = m.w.final_norm.tensor(), .out = pn, .eps = kEps}));
  }
  return b.Linear({pn, m.w.LmHead(), Tensor(), w.logits.tensor().Rows(0, r)});
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
// (`rounds` rounds): the GPU's time for the step, the host's recording of it hidden.
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

// Switches of a run beyond the table's shape (see main's usage).
struct RunFlags {
  bool timeline = false;         // --timeline: only the kernel timelines of decode steps
};

// One step's kernels as the GPU ran them: the last graph step replayed 5 times back to back
// under the kernel timeline, the middle replay summarized per kernel (name and grid): its
// time on the critical path ("path": from the previous kernel's end to its own), its
// duration, how long before the previous kernel's end it started ("early": PDL), what it
// holds on an SM; then the order of the first kernels. The step's own time comes first.
void PrintStepTimeline(CudaBackend& b, const std::string& what) {
  constexpr int kReplays = 5;
  for (int i = 0; i < 2; ++i) CHECK_OK(b.RelaunchLastGraphStep());
  (void)Must(bench::TakeKernelRecords());
  for (int i = 0; i < kReplays; ++i) CHECK_OK(b.RelaunchLastGraphStep());
  const std::vector<bench::KernelRecord> all = Must(bench::TakeKernelRecords());
  if (all.size() % kReplays != 0 || all.size() < 2 * kReplays) {
    std::printf("%s: timeline has %zu kernels, not %d equal replays\n", what.c_str(), all.size(), kReplays);
    return;
  }
  const size_t per = all.size() / kReplays, first = 2 * per;
  // Each kernel of the middle replay: path, duration and head start in us.
  struct Timing {
    const bench::KernelRecord* k;
    double path, dur, early;
  };
  std::vector<Timing> step;
  uint64_t prev_end = all[first - 1].end_ns;
  for (size_t i = first; i < first + per; ++i) {
    const bench::KernelRecord& k = all[i];
    const double prev = static_cast<double>(prev_end);
    step.push_back({&k, (static_cast<double>(k.end_ns) - prev) / 1e3, (k.end_ns - k.start_ns) / 1e3,
                    (prev - static_cast<double>(k.start_ns)) / 1e3});
    prev_end = std::max(prev_end, k.end_ns);
  }
  struct Agg {
    int count = 0;
    double path = 0, dur = 0, early = 0;
    const bench::KernelRecord* k = nullptr;
  };
  std::map<std::string, Agg> agg;
  for (const Timing& t : step) {
    Agg& a = agg[t.k->name + " x" + std::to_string(t.k->grid)];
    ++a.count;
    a.path += t.path;
    a.dur += t.dur;
    a.early += t.early;
    a.k = t.k;
  }
  std::printf("\ntimeline %s: %zu kernels, %.3f ms (end of the previous replay to the end of this one)\n",
              what.c_str(), per, (prev_end - all[first - 1].end_ns) / 1e6);
  std::vector<std::pair<std::string, Agg>> rows(agg.begin(), agg.end());
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.path > y.second.path; });
  std::printf("  %-52s %5s %9s %8s %8s %8s %5s %7s %7s\n", "kernel x blocks", "n", "path ms", "path us", "dur us",
              "early us", "regs", "smem KB", "cfg KB");
  for (const auto& [name, a] : rows) {
    std::printf("  %-52.52s %5d %9.3f %8.2f %8.2f %8.2f %5d %7.1f %7.1f\n", name.c_str(), a.count, a.path / 1e3,
                a.path / a.count, a.dur / a.count, a.early / a.count, a.k->registers, a.k->shared_bytes / 1024.0,
                a.k->smem_config / 1024.0);
  }
  std::printf("  first kernels (path / dur / early, us):");
  for (size_t i = 0; i < std::min<size_t>(step.size(), 14); ++i) {
    const Timing& t = step[i];
    std::printf("%s %s x%d %.1f/%.1f/%.1f", i % 3 == 0 ? "\n   " : " |", t.k->name.substr(0, 28).c_str(), t.k->grid,
                t.path, t.dur, t.early);
  }
  std::printf("\n");
}

int Run(bool quick, bool decode_only, int repeat, int reps, const RunFlags& flags) {
  CudaBackendOptions options;
  bool timeline_on = false;
  if (flags.timeline) {
    const Status t = bench::EnableKernelTimeline();
    if (!t.ok()) std::printf("kernel timeline unavailable (%s): step times only\n", t.ToString().c_str());
    timeline_on = t.ok();
  }
  auto backend = Must(CudaBackend::Create(options));
  CudaBackend& b = *backend;
  cudaStream_t s = b.stream();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);

  // Ceiling 1: HBM read bandwidth (streaming-read kernel over 4 GiB, rotating 2 halves).
  double read_gbs = 0;
  {
    const size_t bytes = size_t{4} << 30;
    Buffer buf = Must(b.Allocate(DType::kBF16, {static_cast<int64_t>(bytes / 2)}));
    Buffer sink = Must(b.Allocate(DType::kU8, {4096 * 16 * 4}));
    Fill(b, buf, 0.f, 1.f);
    const double ms = MedianMs(s, 3, 20, [&] {
      CHECK_OK(bench::LaunchStreamingRead(buf.tensor().data, bytes, sink.tensor().data, s));
    });
    read_gbs = bytes / (ms * 1e-3) / 1e9;
  }
  // Ceiling 2: cuBLAS bf16 GEMM 8192^3 on random data.
  double gemm_tflops = 0;
  {
    const int64_t d = 8192;
    Buffer x = Must(b.Allocate(DType::kBF16, {d, d})), wt = Must(b.Allocate(DType::kBF16, {d, d}));
    Buffer y = Must(b.Allocate(DType::kBF16, {d, d}));
    Fill(b, x, 0.f, 1.f);
    Fill(b, wt, 0.f, 1.f);
    auto h = Must(cuda::CublasHandle::Create());
    cuda::GemmParams g{.x = x.tensor().data, .w = wt.tensor().data, .y = y.tensor().data, .m = d, .n = d, .k = d};
    const double ms = MedianMs(s, 3, 15, [&] { CHECK_OK(cuda::GemmBf16(h, g, s)); });
    gemm_tflops = 2.0 * d * d * d / (ms * 1e-3) / 1e12;
  }
  // Ceiling 3: HBM read as PERFORMANCE.md's reference measures it, a decode-shaped GEMV through
  // cuBLAS (bf16 1x4096 . 4096x28672, the gate/up shape), two weight copies in turn (470 MB, far
  // above L2). A single 235 MB kernel reads slower than the 4 GiB streaming read (its ramp and
  // tail are a larger share), so decode ratios against it are higher: both are printed.
  double gemv_gbs = 0;
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
        cuda::GemmParams g{.x = x.tensor().data, .w = (i % 2 ? w1 : w0).tensor().data, .y = y.tensor().data,
                           .m = 1, .n = n, .k = k};
        CHECK_OK(cuda::GemmBf16(h, g, s));
      }
    });
    gemv_gbs = kBackToBack * static_cast<double>(n) * k * 2 / (ms * 1e-3) / 1e9;
  }
  std::printf(
      "ceilings: HBM read %.0f GB/s (streaming read, 4 GiB); decode-shaped GEMV %.0f GB/s (cuBLAS 1x4096 . "
      "4096x28672); bf16 GEMM 8192^3 %.0f TFLOP/s\n",
      read_gbs, gemv_gbs, gemm_tflops);

  Model m = MakeModel(b);
  const int max_seqs = 256, max_ctx = quick ? 1024 : 8192;
  const int64_t kv_tokens = quick ? 256 * 1024 : 64 * 8192;  // the largest decode config that fits
  const int num_blocks = static_cast<int>(kv_tokens / kBlock);
  model::ModelConfig mc;
  mc.num_layers = kLayers;
  mc.num_kv_heads = kKvHeads;
  mc.head_dim = kHeadDim;
  PagedKvCache cache = Must(PagedKvCache::Create(&b, KvLayoutForModel(mc, kBlock, num_blocks, DType::kBF16)));
  CHECK_OK(bench::LaunchFillRandomBf16(static_cast<__nv_bfloat16*>(cache.pool().data), cache.pool().NumBytes() / 2,
                                         g_seed++, 0.f, 1.f, s));
  Work w = MakeWork(b, m, max_ctx, max_seqs, max_ctx, cache.layout());
  CHECK_OK(b.Synchronize());
  const double kv_token_bytes = static_cast<double>(cache.layout().BytesPerToken());
  std::printf("weights streamed per decode step: %.3f GB; KV pool %.1f GB (%d blocks of %d)\n",
              m.streamed_bytes / 1e9, cache.layout().TotalBytes() / 1e9, num_blocks, kBlock);

  if (flags.timeline) {
    for (auto [bs, ctx] : std::vector<std::pair<int, int>>{{1, 1024}, {1, 8192}, {8, 1024}, {8, 8192}}) {
      Step st = Upload(b, w, bs, 1, ctx, ctx / kBlock);
      auto graph_step = [&] {
        CHECK_OK(b.BeginGraphStep());
        CHECK_OK(Forward(b, m, w, st, cache));
        CHECK_OK(b.EndGraphStep());
      };
      const double ms = MedianMs(s, 3, 10, graph_step);
      const double gpu = MedianReplayMs(b, 5, 10);
      const double floor_ms = (m.streamed_bytes + static_cast<double>(bs) * ctx * kv_token_bytes) / (read_gbs * 1e9) * 1e3;
      const std::string what = "b=" + std::to_string(bs) + " ctx=" + std::to_string(ctx);
      std::printf("\n%s traced: graph %.3f ms, replays %.3f ms, floor %.3f ms (%.3f of it)\n", what.c_str(), ms, gpu,
                  floor_ms, floor_ms / gpu);
      if (timeline_on) PrintStepTimeline(b, what);
    }
    return 0;
  }

  struct Row {
    std::string what;
    double ms, per_s, floor_ms, ratio;
  };
  std::vector<Row> rows;
  const std::vector<int> batches = decode_only ? std::vector<int>{1, 8} : std::vector<int>{1, 8, 64, 256};
  // --decode-only: b=1 and b=8 at 1K and 8K contexts (--quick: 1K only).
  const std::vector<int> contexts = quick ? std::vector<int>{1024} : std::vector<int>{1024, 8192};
  for (int round = 0; round < (decode_only ? repeat : 1); ++round)
  for (int ctx : contexts) {
    for (int bs : batches) {
      const std::string what = "decode b=" + std::to_string(bs) + " ctx=" + std::to_string(ctx);
      if (static_cast<int64_t>(bs) * ctx > kv_tokens) {
        std::printf("%-24s skipped: KV %.0f GB does not fit next to the weights\n", what.c_str(),
                    bs * ctx * kv_token_bytes / 1e9);
        continue;
      }
      const int bps = ctx / kBlock;
      Step st = Upload(b, w, bs, 1, ctx, bps);
      Part part = Part::kAll;
      auto graph_step = [&] {
        CHECK_OK(b.BeginGraphStep());
        Status f = Forward(b, m, w, st, cache, part);
        if (!f.ok()) b.CancelGraphStep();
        CHECK_OK(f);
        CHECK_OK(b.EndGraphStep());
      };
      const double ms = MedianMs(s, 3, bs * ctx >= 64 * 8192 ? 10 : reps, graph_step);
      const double bytes = m.streamed_bytes + static_cast<double>(bs) * ctx * kv_token_bytes;
      const double floor_ms = bytes / (read_gbs * 1e9) * 1e3;
      rows.push_back({what + " (graph)", ms, bs / (ms * 1e-3), floor_ms, floor_ms / ms});
      if (bs * ctx < 64 * 8192) {
        // The row above times each step alone: the host records it (the GPU idle), then the
        // graph runs. Back to back, the GPU's own time per step.
        const double gpu = MedianReplayMs(b, 7, 10);
        rows.push_back({what + " (graph replays)", gpu, bs / (gpu * 1e-3), floor_ms, floor_ms / gpu});
        // The host's share of the difference: recording the step and launching its graph,
        // each after the previous step has finished (as the rows above run them).
        std::vector<double> host_us;
        for (int i = 0; i < 21; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          graph_step();
          host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
          CHECK_OK(b.Synchronize());
        }
        std::sort(host_us.begin(), host_us.end());
        std::printf("host %s: recording + graph launch %.1f us (median of 21)\n", what.c_str(), host_us[10]);
      }
      if (bs <= 8) {
        // The fused SiLU-mul against its kernel, same run.
        part = Part::kSiluKernel;
        const double silu_kernel = MedianMs(s, 3, reps, graph_step);
        rows.push_back({what + " (SiLU as a kernel)", silu_kernel, bs / (silu_kernel * 1e-3), floor_ms,
                        floor_ms / silu_kernel});
        if (bs == 1) {
          const double gpu = MedianReplayMs(b, 7, 10);
          rows.push_back({what + " (SiLU as a kernel) replays", gpu, bs / (gpu * 1e-3), floor_ms, floor_ms / gpu});
        }
        part = Part::kAll;
      }
      if (bs <= 8 && !decode_only) {
        part = Part::kUnfusedRope;
        const double unfused = MedianMs(s, 3, 30, graph_step);
        part = Part::kAll;
        rows.push_back({what + " (RoPE unfused)", unfused, bs / (unfused * 1e-3), floor_ms, floor_ms / unfused});
      }
      if (bs == 1 && !decode_only) {
        const double eager = MedianMs(s, 2, 10, [&] { CHECK_OK(Forward(b, m, w, st, cache)); });
        rows.push_back({what + " (eager)", eager, bs / (eager * 1e-3), floor_ms, floor_ms / eager});
      }
      if (bs == 1 && ctx == 1024) {
        // Attribution: the GEMMs alone (floor: weights only), and everything but attention.
        part = Part::kGemmsOnly;
        const double gemms = MedianMs(s, 3, reps, graph_step);
        const double wfloor = m.streamed_bytes / (read_gbs * 1e9) * 1e3;
        rows.push_back({"  b=1 GEMMs only (graph)", gemms, 1 / (gemms * 1e-3), wfloor, wfloor / gemms});
        part = Part::kNoAttention;
        const double no_attn = MedianMs(s, 3, reps, graph_step);
        rows.push_back({"  b=1 all but attention", no_attn, 1 / (no_attn * 1e-3), wfloor, wfloor / no_attn});
        part = Part::kAll;
      }
    }
  }
  for (int t : decode_only ? std::vector<int>{} : quick ? std::vector<int>{512} : std::vector<int>{512, 2048, 4096, 8192}) {
    Step st = Upload(b, w, 1, t, t, t / kBlock);
    const double ms = MedianMs(s, 1, 5, [&] { CHECK_OK(Forward(b, m, w, st, cache)); });
    const double layer_params = static_cast<double>(kQkv + kHeads * kHeadDim + 3.0 * kFfn) * kHidden;
    const double flops = 2.0 * t * kLayers * layer_params +
                         2.0 * static_cast<double>(t) * t * kHeadDim * kHeads * kLayers + 2.0 * kHidden * kVocab;
    const double floor_ms = flops / (gemm_tflops * 1e12) * 1e3;
    rows.push_back({"prefill " + std::to_string(t), ms, t / (ms * 1e-3), floor_ms, floor_ms / ms});
  }
  // KV swap: 512 blocks (32 layers x 64 KiB each = 1 GiB) out to pinned host and back in.
  struct SwapRow {
    std::string what;
    double gbs, ceiling;
  };
  std::vector<SwapRow> swaps;
  if (!decode_only) {
    const int nb = 512;
    const double bytes = static_cast<double>(nb) * cache.layout().BytesPerBlockLayer() * kLayers;
    auto tiers = Must(cuda::CudaKvTierStorage::Create(cache.pool().data, cache.layout(), nb, s));
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
        CHECK_OK(cuda::CudaStatus(cudaMemcpyAsync(kind == cudaMemcpyDeviceToHost ? host : dev,
                                                  kind == cudaMemcpyDeviceToHost ? dev : host,
                                                  static_cast<size_t>(bytes), kind, tiers->copy_stream()),
                                  "pinned copy"));
      });
    };
    const double d2h = pinned(cudaMemcpyDeviceToHost), h2d = pinned(cudaMemcpyHostToDevice);
    swaps.push_back({"swap out 512 blocks (runs)", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(out)); }), d2h});
    swaps.push_back({"swap in 512 blocks (runs)", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(in)); }), h2d});
    swaps.push_back(
        {"swap out 512 scattered blocks", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(scattered)); }), d2h});
    swaps.push_back(
        {"swap in 512 scattered blocks", wall_gbs([&] { CHECK_OK(tiers->ExecuteCopies(scattered_in)); }), h2d});
  }

  std::printf("\ngraphs captured %d, replays %d\n", b.graphs_captured(), b.graph_replays());
  std::printf("\n%-30s %10s %12s %10s %8s %8s\n", "step", "ms", "tokens/s", "floor ms", "ratio", "/GEMV");
  for (const Row& r : rows) {
    std::printf("%-30s %10.3f %12.0f %10.3f %8.3f", r.what.c_str(), r.ms, r.per_s, r.floor_ms, r.ratio);
    if (r.what.rfind("prefill", 0) == 0) {
      std::printf("\n");
    } else {  // the same floor over the decode-shaped GEMV's read rate instead
      std::printf(" %8.3f\n", r.ratio * read_gbs / gemv_gbs);
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
}  // namespace tandem::runtime

int main(int argc, char** argv) {
  bool quick = false, decode_only = false;
  int repeat = 1, reps = 30;
  tandem::runtime::RunFlags flags;
  for (int i = 1; i < argc; ++i) {
    flags.timeline |= std::strcmp(argv[i], "--timeline") == 0;
    quick |= std::strcmp(argv[i], "--quick") == 0;
    decode_only |= std::strcmp(argv[i], "--decode-only") == 0;
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
  }
  if (tandem::cuda::DeviceCount() == 0) {
    std::printf("model_bench: no CUDA device, nothing to measure\n");
    return 0;
  }
  return tandem::runtime::Run(quick, decode_only, repeat, reps, flags);
}
