#include "common/runtime/cuda_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/cuda/cuda_status.h"
#include "common/cuda/device_buffer.h"
#include "common/cuda/gemm.h"
#include "common/cuda/kv_tier_storage_cuda.h"
#include "common/kernels/decode_attention.h"
#include "common/kernels/embedding.h"
#include "common/kernels/misc_ops.h"
#include "common/kernels/prefill_attention.h"
#include "common/kernels/rms_norm.h"
#include "common/kernels/rope_kv_write.h"
#include "common/kernels/silu_mul.h"
#include "common/kernels/skinny_gemm.h"
#include "common/runtime/cuda_host_copy_queue.h"
#include "common/runtime/op_checks.h"

namespace tandem::runtime {
namespace {

constexpr int64_t kMaxAllocBytes = int64_t{1} << 40;
constexpr size_t kStagingAlign = 256;
// Linear with at most this many rows runs the skinny GEMM kernel (weights read once at HBM
// speed), more rows cuBLAS (bench/kernels/skinny_gemm_bench compares the two per shape).
constexpr int64_t kSkinnyGemmMaxRows = 8;
static_assert(kSkinnyGemmMaxRows <= kernels::kSkinnyGemmMaxM);

// A zeroed parameter struct, so its padding bytes are deterministic (they become part of a
// graph key).
template <typename T>
T Zeroed() {
  T t;
  std::memset(static_cast<void*>(&t), 0, sizeof(T));
  return t;
}

const __nv_bfloat16* Bf16(const Tensor& t) { return static_cast<const __nv_bfloat16*>(t.data); }
__nv_bfloat16* MutBf16(const Tensor& t) { return static_cast<__nv_bfloat16*>(t.data); }

// The first element of `layer` in a pool of `layout`.
__nv_bfloat16* LayerBase(const Tensor& pool, const kv_cache::KvLayout& layout, int layer) {
  return MutBf16(pool) + layout.BlockOffset(layer, 0) / sizeof(__nv_bfloat16);
}

// Shapes the tensor-core attention kernels take.
bool FastAttentionShape(const kv_cache::KvLayout& l, int64_t num_q_heads) {
  const int64_t group = num_q_heads / l.num_kv_heads;
  return (l.head_dim == 64 || l.head_dim == 128) && l.block_size >= 8 && l.block_size <= 64 &&
         (l.block_size & (l.block_size - 1)) == 0 && group <= 16;
}

Status OnDevice(const char* op, const Tensor& t) {
  if (t.defined() && t.device != Device::kCuda) {
    return InvalidArgumentError(fmt::format("{}: tensor {} is not on the GPU", op, t.DebugString()));
  }
  return Status::Ok();
}

}  // namespace

struct CudaBackend::Impl {
  ~Impl() {
    for (cudaEvent_t e : upload_done) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  cuda::CublasHandle cublas;
  cuda::DeviceBuffer cublas_workspace;
  cuda::PinnedBuffer staging;
  // FillDevice's two chunks (created by its first call) and, per chunk, an event after
  // the last copy that reads it.
  cuda::PinnedBuffer upload;
  cudaEvent_t upload_done[2] = {nullptr, nullptr};
};

Status CudaBackendOptions::Validate() const {
  if (device < 0) return InvalidArgumentError("CudaBackendOptions: device < 0");
  if (staging_bytes < kStagingAlign) return InvalidArgumentError("CudaBackendOptions: staging_bytes too small");
  if (upload_chunk_bytes == 0 || upload_chunk_bytes % kStagingAlign != 0) {
    return InvalidArgumentError("CudaBackendOptions: upload_chunk_bytes must be a positive multiple of 256");
  }
  if (max_graphs < 1) return InvalidArgumentError("CudaBackendOptions: max_graphs must be >= 1");
  return Status::Ok();
}

CudaBackend::CudaBackend(const CudaBackendOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& options) {
  TANDEM_RETURN_IF_ERROR(options.Validate());
  if (cuda::DeviceCount() <= options.device) {
    return FailedPreconditionError(fmt::format("CudaBackend: no CUDA device {}", options.device));
  }
  std::unique_ptr<CudaBackend> b(new CudaBackend(options));
  TANDEM_RETURN_IF_ERROR(b->Init());
  return b;
}

Status CudaBackend::Init() {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(options_.device));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, options_.device));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&graph_done_, cudaEventDisableTiming));
  TANDEM_ASSIGN_OR_RETURN(impl_->cublas, cuda::CublasHandle::Create());
  TANDEM_ASSIGN_OR_RETURN(impl_->cublas_workspace, cuda::DeviceBuffer::Allocate(options_.cublas_workspace_bytes));
  TANDEM_RETURN_IF_CUBLAS_ERROR(cublasSetStream(impl_->cublas.get(), stream_));
  if (options_.cublas_workspace_bytes > 0) {
    TANDEM_RETURN_IF_CUBLAS_ERROR(
        cublasSetWorkspace(impl_->cublas.get(), impl_->cublas_workspace.data(), options_.cublas_workspace_bytes));
  }
  TANDEM_ASSIGN_OR_RETURN(impl_->staging, cuda::PinnedBuffer::Allocate(options_.staging_bytes));
  return Status::Ok();
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  TANDEM_CHECK_EQ(live_buffers_, 0) << "CudaBackend destroyed with live buffers";
  impl_.reset();
  if (graph_done_ != nullptr) cudaEventDestroy(graph_done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

StatusOr<Buffer> CudaBackend::Allocate(DType dtype, const std::vector<int64_t>& shape) {
  if (recording_) return FailedPreconditionError("Allocate inside a graph step");
  if (shape.size() > kMaxTensorDims) return InvalidArgumentError("Allocate: too many dims");
  int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && bytes > kMaxAllocBytes / d)) {
      return InvalidArgumentError(fmt::format("Allocate: bad shape dim {}", d));
    }
    bytes *= d;
  }
  const size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 1;
  void* data = nullptr;
  cudaError_t err = cudaMalloc(&data, size);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhaustedError(fmt::format("Allocate: cudaMalloc({} bytes): {}", size, cudaGetErrorString(err)));
  }
  err = cudaMemsetAsync(data, 0, size, stream_);
  if (err != cudaSuccess) {
    cudaFree(data);
    return cuda::CudaStatus(err, "cudaMemsetAsync");
  }
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = Device::kCuda;
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  ++live_buffers_;
  return Buffer(t, this);
}

void CudaBackend::Free(void* data) {
  cudaFree(data);  // synchronizes the device; an error here has no one to report to
  --live_buffers_;
}

Status CudaBackend::CopyToDevice(const void* src, size_t num_bytes, Tensor dst) {
  if (!dst.defined() || dst.device != Device::kCuda || num_bytes != dst.NumBytes()) {
    return InvalidArgumentError(fmt::format("CopyToDevice: {} bytes into {}", num_bytes, dst.DebugString()));
  }
  if (num_bytes == 0) return Status::Ok();
  if (!recording_) {
    // Pageable sources are staged by the driver before this returns, so `src` may be reused.
    TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst.data, src, num_bytes, cudaMemcpyHostToDevice, stream_));
    return Status::Ok();
  }
  const size_t offset = staging_used_;
  if (offset + num_bytes > impl_->staging.size_bytes()) {
    return ResourceExhaustedError(
        fmt::format("CopyToDevice: graph-step staging of {} bytes is full", impl_->staging.size_bytes()));
  }
  staging_used_ = (offset + num_bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  char* staged = impl_->staging.as<char>() + offset;
  std::memcpy(staged, src, num_bytes);
  struct {
    void* dst;
    size_t bytes, offset;
  } key{dst.data, num_bytes, offset};
  return Enqueue("copy", &key, sizeof(key), [dst = dst.data, staged, num_bytes](cudaStream_t s) {
    return cuda::CudaStatus(cudaMemcpyAsync(dst, staged, num_bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  });
}

Status CudaBackend::FillDevice(Tensor dst, const HostFill& fill) {
  if (recording_) return FailedPreconditionError("FillDevice inside a graph step");
  if (!dst.defined() || dst.device != Device::kCuda) {
    return InvalidArgumentError(fmt::format("FillDevice: {} is not on the GPU", dst.DebugString()));
  }
  const size_t chunk = options_.upload_chunk_bytes;
  for (cudaEvent_t& e : impl_->upload_done) {
    if (e == nullptr) {
      TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
  }
  if (impl_->upload.data() == nullptr) {
    TANDEM_ASSIGN_OR_RETURN(impl_->upload, cuda::PinnedBuffer::Allocate(2 * chunk));
  }
  const size_t total = dst.NumBytes();
  for (size_t offset = 0, i = 0; offset < total; offset += chunk, i ^= 1) {
    const size_t n = std::min(chunk, total - offset);
    std::byte* host = impl_->upload.as<std::byte>() + i * chunk;
    // The copy that last read this chunk (from this call or an earlier one) must be done.
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(impl_->upload_done[i]));
    TANDEM_RETURN_IF_ERROR(fill(offset, std::span<std::byte>(host, n)));
    TANDEM_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(static_cast<std::byte*>(dst.data) + offset, host, n, cudaMemcpyHostToDevice, stream_));
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(impl_->upload_done[i], stream_));
  }
  return Status::Ok();
}

Status CudaBackend::CopyToHost(Tensor src, void* dst, size_t num_bytes) {
  if (recording_) return FailedPreconditionError("CopyToHost inside a graph step");
  if (!src.defined() || src.device != Device::kCuda || num_bytes != src.NumBytes()) {
    return InvalidArgumentError(fmt::format("CopyToHost: {} bytes from {}", num_bytes, src.DebugString()));
  }
  if (num_bytes > 0) {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst, src.data, num_bytes, cudaMemcpyDeviceToHost, stream_));
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

Status CudaBackend::Synchronize() {
  if (recording_) return FailedPreconditionError("Synchronize inside a graph step");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_));
  return Status::Ok();
}

size_t CudaBackend::AttentionWorkspaceBytes(const PagedAttentionParams& m) const {
  if (m.q.ndim != 3 || !FastAttentionShape(m.layout, m.q.shape[1])) return 0;
  auto d = Zeroed<kernels::DecodeAttentionParams>();
  d.num_q_heads = static_cast<int>(m.q.shape[1]);
  d.num_kv_heads = m.layout.num_kv_heads;
  d.head_dim = m.layout.head_dim;
  d.block_size = m.layout.block_size;
  // Graph steps plan for the whole block-table width: one block more than the longest context.
  d.max_context_len = m.max_context_len + m.layout.block_size;
  d.max_blocks_per_seq = (d.max_context_len + d.block_size - 1) / d.block_size;
  d.softmax_scale = 1.0f;
  size_t most = 0;
  for (int s = 1; s <= m.num_seqs; ++s) {
    d.num_seqs = s;
    auto plan = kernels::PlanDecodeAttention(d, num_sms_);
    if (plan.ok()) most = std::max(most, plan->workspace_bytes);
  }
  return most;
}

Status CudaBackend::Embedding(Tensor ids, Tensor table, Tensor out) {
  TANDEM_RETURN_IF_ERROR(CheckEmbedding(ids, table, out, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("Embedding", table));
  if (ids.shape[0] == 0) return Status::Ok();
  if (table.shape[1] % 8 != 0) {
    if (out.dtype == DType::kF32) return UnimplementedError("Embedding: CUDA fp32 rows need a multiple of 8");
    return GatherRows(table, ids, out);
  }
  auto p = Zeroed<kernels::EmbeddingParams>();
  p.ids = ids.As<int32_t>();
  p.table = Bf16(table);
  if (out.dtype == DType::kF32) {
    p.out_f32 = out.As<float>();
  } else {
    p.out = MutBf16(out);
  }
  p.num_tokens = static_cast<int>(ids.shape[0]);
  p.num_rows = static_cast<int>(table.shape[0]);
  p.hidden = static_cast<int>(table.shape[1]);
  return Enqueue("embedding", &p, sizeof(p), [p](cudaStream_t s) { return kernels::LaunchEmbedding(p, s); });
}

Status CudaBackend::RmsNorm(const RmsNormParams& rp) {
  TANDEM_RETURN_IF_ERROR(CheckRmsNorm(rp, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("RmsNorm", rp.x));
  if (rp.x.shape[0] == 0) return Status::Ok();
  if (rp.x.shape[1] % 8 != 0) return UnimplementedError("RmsNorm: CUDA needs a dim that is a multiple of 8");
  auto p = Zeroed<kernels::RmsNormParams>();
  p.input = rp.x.data;
  p.residual = rp.residual.defined() ? rp.residual.data : nullptr;
  p.f32 = rp.x.dtype == DType::kF32;
  p.weight = Bf16(rp.weight);
  p.out = MutBf16(rp.out);
  p.num_rows = static_cast<int>(rp.x.shape[0]);
  p.hidden = static_cast<int>(rp.x.shape[1]);
  p.eps = rp.eps;
  return Enqueue("rmsnorm", &p, sizeof(p), [p](cudaStream_t s) { return kernels::LaunchRmsNorm(p, s); });
}

Status CudaBackend::Linear(const LinearParams& lp) {
  TANDEM_RETURN_IF_ERROR(CheckLinear(lp, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("Linear", lp.x));
  const int64_t rows = lp.x.shape[0];
  if (rows == 0) return Status::Ok();
  if (rows <= kSkinnyGemmMaxRows) {
    auto sp = Zeroed<kernels::SkinnyGemmParams>();
    sp.x = Bf16(lp.x);
    sp.w = Bf16(lp.weight);
    sp.bias = lp.bias.defined() ? Bf16(lp.bias) : nullptr;
    sp.y = lp.out.data;
    sp.y_dtype = lp.out.dtype;
    sp.m = static_cast<int>(rows);
    sp.n = static_cast<int>(lp.weight.shape[0]);
    sp.k = static_cast<int>(lp.x.shape[1]);
    sp.accumulate = lp.accumulate;
    sp.silu_mul = lp.silu_mul;
    if (kernels::ValidateSkinnyGemm(sp).ok()) {
      return Enqueue("skinny_gemm", &sp, sizeof(sp), [sp](cudaStream_t s) { return kernels::LaunchSkinnyGemm(sp, s); });
    }
  }
  // cuBLAS, with the options as their own kernels.
  const cuda::CublasHandle* handle = &impl_->cublas;
  return LinearAsOps(lp, [this, handle](const LinearParams& q) {
    auto g = Zeroed<cuda::GemmParams>();
    g.x = q.x.data;
    g.w = q.weight.data;
    g.y = q.out.data;
    g.m = q.x.shape[0];
    g.n = q.weight.shape[0];
    g.k = q.x.shape[1];
    g.y_dtype = q.out.dtype;
    g.alpha = 1.0f;
    g.beta = q.accumulate ? 1.0f : 0.0f;
    TANDEM_RETURN_IF_ERROR(
        Enqueue("gemm", &g, sizeof(g), [g, handle](cudaStream_t s) { return cuda::GemmBf16(*handle, g, s); }));
    if (!q.bias.defined()) return Status::Ok();
    struct {
      void* y;
      const void* bias;
      int64_t rows, cols;
      bool f32;
    } key{};
    key = {q.out.data, q.bias.data, g.m, g.n, q.out.dtype == DType::kF32};
    return Enqueue("bias", &key, sizeof(key), [key](cudaStream_t s) {
      return kernels::LaunchAddBias(key.y, key.f32, static_cast<const __nv_bfloat16*>(key.bias), key.rows, key.cols, s);
    });
  });
}

namespace {

kernels::RopeConfig KernelRope(double theta, const model::RopeScaling& sc) {
  kernels::RopeConfig r;
  r.theta = static_cast<float>(theta);
  switch (sc.type) {
    case model::RopeScalingType::kNone: r.scaling = kernels::RopeScaling::kNone; break;
    case model::RopeScalingType::kLinear: r.scaling = kernels::RopeScaling::kLinear; break;
    case model::RopeScalingType::kLlama3: r.scaling = kernels::RopeScaling::kLlama3; break;
  }
  r.factor = static_cast<float>(sc.factor);
  r.low_freq_factor = static_cast<float>(sc.low_freq_factor);
  r.high_freq_factor = static_cast<float>(sc.high_freq_factor);
  r.original_max_position = static_cast<float>(sc.original_max_position_embeddings);
  return r;
}

// The kernel's parameters for a checked RopeKvWrite with at least one token.
kernels::RopeKvWriteParams KernelRopeParams(const RopeKvWriteParams& rp) {
  const auto& l = rp.layout;
  auto p = Zeroed<kernels::RopeKvWriteParams>();
  p.qkv = Bf16(rp.qkv);
  p.qkv_stride = rp.qkv.shape[1];
  p.positions = rp.positions.As<int32_t>();
  p.slot_mapping = rp.slot_mapping.As<int64_t>();
  p.q_out = MutBf16(rp.q_out);
  p.kv_cache = LayerBase(rp.kv_pool, l, rp.layer);
  p.num_cache_blocks = l.num_blocks;
  p.q_norm_weight = rp.q_norm.defined() ? Bf16(rp.q_norm) : nullptr;
  p.k_norm_weight = rp.k_norm.defined() ? Bf16(rp.k_norm) : nullptr;
  p.norm_eps = rp.norm_eps;
  p.num_tokens = static_cast<int>(rp.q_out.shape[0]);
  p.num_q_heads = static_cast<int>(rp.q_out.shape[1]);
  p.num_kv_heads = l.num_kv_heads;
  p.head_dim = l.head_dim;
  p.block_size = l.block_size;
  p.rope = KernelRope(rp.rope.theta, rp.rope.scaling);
  return p;
}

// A decode-only batch (one new token per sequence) of a shape the decode kernel takes.
bool DecodeBatch(const PagedAttentionParams& ap) {
  return FastAttentionShape(ap.layout, ap.q.shape[1]) && ap.max_query_len == 1 && ap.q.shape[0] == ap.num_seqs;
}

}  // namespace

Status CudaBackend::RopeKvWrite(const RopeKvWriteParams& rp) {
  TANDEM_RETURN_IF_ERROR(CheckRopeKvWrite(rp, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("RopeKvWrite", rp.kv_pool));
  if (rp.q_out.shape[0] == 0) return Status::Ok();
  const kernels::RopeKvWriteParams p = KernelRopeParams(rp);
  return Enqueue("rope", &p, sizeof(p), [p](cudaStream_t s) { return kernels::LaunchRopeKvWrite(p, s); });
}

Status CudaBackend::RopeKvWriteAndAttention(const RopeKvWriteParams& rp, const PagedAttentionParams& ap) {
  TANDEM_RETURN_IF_ERROR(CheckRopeKvWrite(rp, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(CheckPagedAttention(ap, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("RopeKvWriteAndAttention", rp.kv_pool));
  const bool same = rp.q_out.data == ap.q.data && rp.kv_pool.data == ap.kv_pool.data && rp.layer == ap.layer &&
                    rp.q_out.shape[0] == ap.q.shape[0];
  if (!same) {
    return InvalidArgumentError("RopeKvWriteAndAttention: attention must read the rotated q of the same layer");
  }
  if (ap.q.shape[0] == 0 || ap.num_seqs == 0 || !DecodeBatch(ap)) {
    TANDEM_RETURN_IF_ERROR(RopeKvWrite(rp));
    return PagedAttention(ap);
  }
  TANDEM_ASSIGN_OR_RETURN(kernels::DecodeAttentionParams d, DecodeParams(ap));
  const kernels::RopeKvWriteParams rope = KernelRopeParams(rp);
  std::memcpy(static_cast<void*>(&d.rope), &rope, sizeof(rope));  // padding bytes too: d is a graph key
  return Enqueue("rope_decode_attn", &d, sizeof(d),
                 [d](cudaStream_t s) { return kernels::LaunchDecodeAttention(d, s); });
}

StatusOr<kernels::DecodeAttentionParams> CudaBackend::DecodeParams(const PagedAttentionParams& ap) const {
  const auto& l = ap.layout;
  const int64_t heads = ap.q.shape[1];
  const int width = static_cast<int>(ap.block_tables.shape[1]);
  auto d = Zeroed<kernels::DecodeAttentionParams>();
  d.q = Bf16(ap.q);
  d.kv_cache = LayerBase(ap.kv_pool, l, ap.layer);
  d.block_tables = ap.block_tables.As<int32_t>();
  d.context_lens = ap.context_lens.As<int32_t>();
  d.out = MutBf16(ap.out);
  d.workspace = ap.workspace.defined() ? ap.workspace.As<float>() : nullptr;
  d.num_seqs = ap.num_seqs;
  d.num_q_heads = static_cast<int>(heads);
  d.num_kv_heads = l.num_kv_heads;
  d.head_dim = l.head_dim;
  d.block_size = l.block_size;
  d.max_blocks_per_seq = width;
  d.softmax_scale = ap.scale;
  const size_t have = ap.workspace.defined() ? ap.workspace.NumBytes() : 0;
  // In a graph step the plan covers the whole table width, so the key (and graph) holds
  // for every context length that fits the width; eagerly it covers max_context_len.
  d.max_context_len = recording_ ? width * l.block_size : ap.max_context_len;
  TANDEM_ASSIGN_OR_RETURN(kernels::DecodeAttentionPlan plan, kernels::PlanDecodeAttention(d, num_sms_));
  if (plan.workspace_bytes > have && recording_) {
    d.max_context_len = ap.max_context_len;
    TANDEM_ASSIGN_OR_RETURN(plan, kernels::PlanDecodeAttention(d, num_sms_));
  }
  if (plan.workspace_bytes > have) {
    return InvalidArgumentError(
        fmt::format("PagedAttention: decode needs {} bytes of workspace, have {}", plan.workspace_bytes, have));
  }
  d.num_splits = plan.num_splits;
  // The next kernel (the merge, or the o projection's skinny GEMM) launches only as the
  // attention ends, onto drained SMs (see DecodeAttentionParams::late_next).
  d.late_next = true;
  return d;
}

Status CudaBackend::PagedAttention(const PagedAttentionParams& ap) {
  TANDEM_RETURN_IF_ERROR(CheckPagedAttention(ap, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("PagedAttention", ap.kv_pool));
  const auto& l = ap.layout;
  const int64_t n = ap.q.shape[0], heads = ap.q.shape[1];
  if (n == 0 || ap.num_seqs == 0) return Status::Ok();
  const int width = static_cast<int>(ap.block_tables.shape[1]);
  const bool fast = FastAttentionShape(l, heads);
  if (DecodeBatch(ap)) {
    TANDEM_ASSIGN_OR_RETURN(const kernels::DecodeAttentionParams d, DecodeParams(ap));
    return Enqueue("decode_attn", &d, sizeof(d), [d](cudaStream_t s) { return kernels::LaunchDecodeAttention(d, s); });
  }
  if (fast) {
    auto p = Zeroed<kernels::PrefillAttentionParams>();
    p.q = Bf16(ap.q);
    p.kv_cache = LayerBase(ap.kv_pool, l, ap.layer);
    p.block_tables = ap.block_tables.As<int32_t>();
    p.cu_q_lens = ap.query_start.As<int32_t>();
    p.context_lens = ap.context_lens.As<int32_t>();
    p.out = MutBf16(ap.out);
    p.num_seqs = ap.num_seqs;
    p.num_q_heads = static_cast<int>(heads);
    p.num_kv_heads = l.num_kv_heads;
    p.head_dim = l.head_dim;
    p.block_size = l.block_size;
    p.max_blocks_per_seq = width;
    p.max_q_len = ap.max_query_len;
    p.softmax_scale = ap.scale;
    return Enqueue("prefill_attn", &p, sizeof(p),
                   [p](cudaStream_t s) { return kernels::LaunchPrefillAttention(p, s); });
  }
  auto g = Zeroed<kernels::GenericAttentionParams>();
  g.q = Bf16(ap.q);
  g.kv_cache = LayerBase(ap.kv_pool, l, ap.layer);
  g.block_tables = ap.block_tables.As<int32_t>();
  g.query_start = ap.query_start.As<int32_t>();
  g.context_lens = ap.context_lens.As<int32_t>();
  g.out = MutBf16(ap.out);
  g.num_seqs = ap.num_seqs;
  g.num_q_heads = static_cast<int>(heads);
  g.num_kv_heads = l.num_kv_heads;
  g.head_dim = l.head_dim;
  g.block_size = l.block_size;
  g.max_blocks_per_seq = width;
  g.max_q_len = ap.max_query_len;
  g.softmax_scale = ap.scale;
  return Enqueue("generic_attn", &g, sizeof(g), [g](cudaStream_t s) { return kernels::LaunchGenericAttention(g, s); });
}

Status CudaBackend::SiluAndMul(Tensor gate_up, Tensor out) {
  TANDEM_RETURN_IF_ERROR(CheckSiluAndMul(gate_up, out, DType::kBF16));
  TANDEM_RETURN_IF_ERROR(OnDevice("SiluAndMul", gate_up));
  if (out.shape[0] == 0) return Status::Ok();
  if (out.shape[1] % 8 != 0) return UnimplementedError("SiluAndMul: CUDA needs ffn to be a multiple of 8");
  auto p = Zeroed<kernels::SiluMulParams>();
  p.gate_up = Bf16(gate_up);
  p.out = MutBf16(out);
  p.num_tokens = static_cast<int>(out.shape[0]);
  p.ffn = static_cast<int>(out.shape[1]);
  return Enqueue("silu", &p, sizeof(p), [p](cudaStream_t s) { return kernels::LaunchSiluMul(p, s); });
}

Status CudaBackend::GatherRows(Tensor src, Tensor indices, Tensor out) {
  TANDEM_RETURN_IF_ERROR(CheckGatherRows(src, indices, out));
  TANDEM_RETURN_IF_ERROR(OnDevice("GatherRows", src));
  if (indices.shape[0] == 0) return Status::Ok();
  if (src.dtype == DType::kBF16 && src.shape[1] % 8 == 0) {
    auto p = Zeroed<kernels::EmbeddingParams>();
    p.ids = indices.As<int32_t>();
    p.table = Bf16(src);
    p.out = MutBf16(out);
    p.num_tokens = static_cast<int>(indices.shape[0]);
    p.num_rows = static_cast<int>(src.shape[0]);
    p.hidden = static_cast<int>(src.shape[1]);
    return Enqueue("gather", &p, sizeof(p), [p](cudaStream_t s) { return kernels::LaunchEmbedding(p, s); });
  }
  struct {
    const void* src;
    int64_t rows;
    size_t row_bytes;
    const int32_t* indices;
    int64_t count;
    void* out;
  } key{};
  key = {
      src.data,         src.shape[0], static_cast<size_t>(src.shape[1]) * DTypeSize(src.dtype), indices.As<int32_t>(),
      indices.shape[0], out.data};
  return Enqueue("gather_bytes", &key, sizeof(key), [key](cudaStream_t s) {
    return kernels::LaunchGatherRows(key.src, key.rows, key.row_bytes, key.indices, static_cast<int>(key.count),
                                     key.out, s);
  });
}

StatusOr<std::unique_ptr<kv_cache::KvTierStorage>> CudaBackend::CreateKvTierStorage(Tensor device_pool,
                                                                                    const kv_cache::KvLayout& layout,
                                                                                    int num_host_blocks) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaKvTierStorage> storage,
                          cuda::CudaKvTierStorage::Create(device_pool.data, layout, num_host_blocks, stream_));
  return std::unique_ptr<kv_cache::KvTierStorage>(std::move(storage));
}

StatusOr<std::unique_ptr<HostCopyQueue>> CudaBackend::CreateHostCopyQueue(CopyQueueOptions options) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<CudaHostCopyQueue> queue, CudaHostCopyQueue::Create(*this, options));
  return std::unique_ptr<HostCopyQueue>(std::move(queue));
}

StatusOr<std::shared_ptr<CopyFence>> CudaBackend::MarkCompute() {
  if (recording_) return FailedPreconditionError("MarkCompute inside a graph step");
  return CudaEventFence::Record(options_.device, stream_);
}

Status CudaBackend::PinHostMemory(void* data, size_t num_bytes) {
  if (data == nullptr || num_bytes == 0) return InvalidArgumentError("PinHostMemory: empty range");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaHostRegister(data, num_bytes, cudaHostRegisterDefault));
  return Status::Ok();
}

void CudaBackend::UnpinHostMemory(void* data) {
  if (data != nullptr) cudaHostUnregister(data);
}

}  // namespace tandem::runtime
