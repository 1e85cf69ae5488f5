// CudaBackend: the runtime op set on one NVIDIA GPU. Weights, activations and
// the KV cache are bf16 (compute_dtype() == BF16), math is fp32, logits are
// fp32. Every op is one kernel (common/kernels) or one cuBLAS GEMM, queued on
// the backend's single stream; nothing allocates device memory after the
// model's Create (the attention scratch comes from AttentionWorkspaceBytes)
// except SampleTokens' staging (first call, then doubling when a step needs more).
// Decode-path kernels use programmatic dependent launch (kernels/kernel_util.cuh).
//
// Attention picks, per call: the split-KV decode kernel for decode-only
// batches, the tensor-core prefill kernel for any other batch (head_dim 64 or
// 128, block size a power of two in [8, 64], GQA group <= 16), and a generic
// kernel for every other shape (the tiny test models).
//
// CUDA graphs (decode steps): between BeginGraphStep() and EndGraphStep() the
// ops are recorded instead of launched, host->device copies are staged in
// pinned memory, and the recorded step is keyed by the exact launch
// parameters (pointers, sizes, scalars; decode attention plans for a context
// bound rounded up to a power of two). EndGraphStep replays the graph of an
// equal earlier step, or captures one (kept per key, at most
// CudaBackendOptions::max_graphs), then launches it. The copies' sources are
// re-staged each step at the same pinned addresses, so a replay sees this
// step's metadata. Use it for decode-only batches: their keys repeat for a
// given batch size and block-table width.
// Thread rule: engine thread only (one stream, one cuBLAS handle).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/runtime/backend.h"

namespace tandem::kernels {
struct DecodeAttentionParams;
}  // namespace tandem::kernels

namespace tandem::runtime {

struct CudaBackendOptions {
  int device = 0;                            // CUDA device ordinal
  size_t cublas_workspace_bytes = 32 << 20;  // cuBLAS scratch (fixed, so GEMMs can be captured)
  size_t staging_bytes = 8 << 20;            // pinned staging for host->device copies in graph steps
  // FillDevice's chunk: two pinned buffers of this size (allocated by its first call, kept
  // for the backend's life) take turns, one filling while the other's copy runs. A
  // multiple of 256.
  size_t upload_chunk_bytes = 16 << 20;
  int max_graphs = 64;  // captured step graphs kept (oldest dropped first)

  Status Validate() const;
};

class CudaBackend final : public Backend {
 public:
  // Selects the device, creates the stream, the cuBLAS handle and the pinned
  // staging area. FailedPrecondition when there is no GPU.
  static StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::kCuda; }
  DType compute_dtype() const override { return DType::kBF16; }

  StatusOr<Buffer> Allocate(DType dtype, const std::vector<int64_t>& shape) override;
  Status CopyToDevice(const void* src, size_t num_bytes, Tensor dst) override;
  Status CopyToHost(Tensor src, void* dst, size_t num_bytes) override;
  // Double-buffered through pinned chunks (CudaBackendOptions::upload_chunk_bytes), each
  // copied on the stream while the next fills. FailedPrecondition inside a graph step.
  Status FillDevice(Tensor dst, const HostFill& fill) override;
  size_t AttentionWorkspaceBytes(const PagedAttentionParams& max_shape) const override;

  Status Embedding(Tensor ids, Tensor table, Tensor out) override;
  Status RmsNorm(const RmsNormParams& p) override;
  Status Linear(const LinearParams& p) override;
  Status RopeKvWrite(const RopeKvWriteParams& p) override;
  Status PagedAttention(const PagedAttentionParams& p) override;
  // Decode steps: one kernel (kernels::DecodeAttentionParams::rope); otherwise the two ops.
  Status RopeKvWriteAndAttention(const RopeKvWriteParams& rope, const PagedAttentionParams& attn) override;
  Status SiluAndMul(Tensor gate_up, Tensor out) override;
  Status GatherRows(Tensor src, Tensor indices, Tensor out) override;

  // Graph steps (see the file comment). Begin waits for the previous graph
  // launch to finish reading the staging area. Between Begin and End,
  // CopyToHost and Synchronize are FailedPrecondition. Cancel drops a
  // recorded step (after an error) without launching anything.
  Status BeginGraphStep();
  Status EndGraphStep();
  void CancelGraphStep();
  bool in_graph_step() const { return recording_; }

  // Backend step hooks: a decode-only step is a graph step.
  Status BeginStep(bool decode_only) override;
  Status EndStep() override;
  void AbortStep() override { CancelGraphStep(); }
  // CudaKvTierStorage: pinned host tier, async copies on a copy stream.
  StatusOr<std::unique_ptr<kv_cache::KvTierStorage>> CreateKvTierStorage(Tensor device_pool,
                                                                         const kv_cache::KvLayout& layout,
                                                                         int num_host_blocks) override;

  // CudaHostCopyQueue: copies on their own stream, fences are events.
  StatusOr<std::unique_ptr<HostCopyQueue>> CreateHostCopyQueue(CopyQueueOptions options = {}) override;
  // An event recorded on the compute stream. FailedPrecondition inside a graph step.
  StatusOr<std::shared_ptr<CopyFence>> MarkCompute() override;
  // cudaHostRegister / cudaHostUnregister.
  Status PinHostMemory(void* data, size_t num_bytes) override;
  void UnpinHostMemory(void* data) override;

  // Sampling on the GPU (cuda_sampling.cc): penalties and min_tokens masks in
  // place in `logits`, NaN -> -inf where a row is sampled, then the argmax or
  // sampler kernel (common/kernels/sampling.h, draws seeded by (seed, output
  // count)). Only the per-row parameters and penalty lists go up, in one copy
  // through pinned staging that grows to the largest step seen (no allocation
  // in steady state), and one int32 per row comes back; waits for it.
  // FailedPrecondition inside a graph step.
  Status SampleTokens(Tensor logits, std::span<const SampleRequest> requests, std::span<SampledToken> out) override;
  Status PromptLogprobs(Tensor logits, std::span<const TokenId> tokens, int k,
                        std::span<SampledLogprobs> out) override;

  // Blocks until all queued work is done.
  Status Synchronize();
  int device_ordinal() const { return options_.device; }
  cudaStream_t stream() const { return stream_; }
  int num_sms() const { return num_sms_; }

  // Launches the graph of the last graph step again, with the metadata that step staged:
  // benchmarks time replays back to back, the GPU's time per step without the host's
  // recording of it. FailedPrecondition before the first graph step.
  Status RelaunchLastGraphStep();

  // Counters for tests and benchmarks.
  int live_buffers() const { return live_buffers_; }
  int graphs_captured() const { return graphs_captured_; }
  int graph_replays() const { return graph_replays_; }

 protected:
  void Free(void* data) override;

 private:
  struct Impl;
  struct SamplingState;  // cuda_sampling.cc
  struct SamplingStateDeleter {
    void operator()(SamplingState* state) const;
  };
  // A recorded launch: its closure (trivially copyable) lies at `offset` in closures_.
  struct Recorded {
    Status (*run)(const unsigned char* closure, cudaStream_t stream);
    size_t offset;
  };

  explicit CudaBackend(const CudaBackendOptions& options);
  Status Init();
  // The decode kernel's parameters and plan for a checked decode-only PagedAttention.
  StatusOr<kernels::DecodeAttentionParams> DecodeParams(const PagedAttentionParams& ap) const;
  // Runs `launch` now, or records it with `key` (the bytes of its parameters) when inside
  // a graph step. Recording copies the closure into closures_ (no allocation per op once
  // the buffers have grown: a step records a few hundred ops).
  template <typename F>
  Status Enqueue(const char* op, const void* key, size_t key_bytes, F&& launch) {
    if (!recording_) return launch(stream_);
    using Fn = std::decay_t<F>;
    static_assert(std::is_trivially_copyable_v<Fn> && alignof(Fn) <= kClosureAlign,
                  "a recorded launch captures plain values only");
    auto run = [](const unsigned char* closure, cudaStream_t stream) {
      return (*reinterpret_cast<const Fn*>(closure))(stream);
    };
    std::memcpy(AppendRecord(op, key, key_bytes, sizeof(Fn), run), &launch, sizeof(Fn));
    return Status::Ok();
  }
  static constexpr size_t kClosureAlign = 16;
  // Appends op and key to key_, and to recorded_ a record that runs `run` on closure_bytes
  // of closures_; returns where the caller copies the closure.
  unsigned char* AppendRecord(const char* op, const void* key, size_t key_bytes, size_t closure_bytes,
                              Status (*run)(const unsigned char*, cudaStream_t));

  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t graph_done_ = nullptr;
  std::unique_ptr<Impl> impl_;
  int num_sms_ = 0;
  int live_buffers_ = 0;

  // Graph-step state.
  bool recording_ = false;
  std::string key_;
  std::vector<Recorded> recorded_;
  std::vector<unsigned char> closures_;
  size_t staging_used_ = 0;
  std::unordered_map<std::string, cudaGraphExec_t> graphs_;
  std::deque<std::string> graph_order_;
  cudaGraphExec_t last_graph_ = nullptr;   // the last launched, still in graphs_
  const std::string* last_key_ = nullptr;  // its key (in graphs_): a repeated step skips the hash
  int graphs_captured_ = 0;
  int graph_replays_ = 0;

  // SampleTokens' staging and scratch, created by its first call.
  std::unique_ptr<SamplingState, SamplingStateDeleter> sampling_;
};

}  // namespace tandem::runtime
