// Backend: an op set plus the memory it runs on. The CPU backend (fp32
// reference) and the CUDA backend implement it; the model forward, the KV
// cache and the weight loader only see this interface.
//
// Buffer: an owning, move-only allocation from a backend (RAII). It must not
// outlive its backend.
// Thread rule: a backend and its buffers belong to one thread (the engine thread).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/base/dtype.h"
#include "common/base/status.h"
#include "common/kv_cache/kv_tier_storage.h"
#include "common/model/model_config.h"
#include "common/runtime/ops.h"
#include "common/runtime/sampler.h"
#include "common/runtime/tensor.h"

namespace tandem::runtime {

class Backend;
struct LlamaWeights;

// A whole decode-only step (every sequence one new token) of a Llama-family model, for
// Backend::FusedDecodeStep. Tensors are on the backend's device; the metadata tensors are
// the step's (BatchPlan), already copied.
struct FusedDecodeParams {
  const model::ModelConfig* config = nullptr;
  const LlamaWeights* weights = nullptr;
  Tensor token_ids{};      // I32 [S]
  Tensor positions{};      // I32 [S]
  Tensor slot_mapping{};   // I64 [S]
  Tensor kv_lens{};        // I32 [S]
  Tensor block_tables{};   // I32 [S, W]
  Tensor logits_rows{};    // I32 [R]
  int num_seqs = 0;        // S
  int num_logits_rows = 0; // R
  int max_kv_len = 0;
  Tensor kv_pool{};
  kv_cache::KvLayout layout;
  Tensor logits{};         // F32 [R, vocab]
  Tensor workspace{};      // U8 [FusedDecodeWorkspaceBytes]
  Tensor trace{};          // optional, benchmarks: the step's timeline (CUDA: I64, see
                           // kernels::DecodeStepParams::trace); not in graph steps
};

// Ready once the device->host copies before it have landed. Ready() may be
// called from any thread.
class CopyFence {
 public:
  virtual ~CopyFence() = default;
  virtual bool Ready() = 0;
};

// Device->host copies that overlap the forward (a node streaming KV out layer
// by layer while later layers compute). Enqueue orders a copy after every op
// issued on the backend so far; Mark returns a fence for every copy enqueued
// before it. The copies read device memory that later steps may reuse, so the
// caller calls JoinCompute once per step after its last Enqueue: the backend's
// later ops then wait for the copies. Copies complete in enqueue order.
// Thread rule: Enqueue/Mark/JoinCompute on the backend's thread.
class HostCopyQueue {
 public:
  virtual ~HostCopyQueue() = default;
  // `dst` must stay valid until a later fence is ready (pinned, on a GPU: see
  // Backend::PinHostMemory, or the copy is synchronous).
  virtual Status Enqueue(Tensor src, void* dst, size_t num_bytes) = 0;
  virtual StatusOr<std::shared_ptr<CopyFence>> Mark() = 0;
  virtual Status JoinCompute() = 0;
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Tensor tensor, Backend* owner) : tensor_(tensor), owner_(owner) {}
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  const Tensor& tensor() const { return tensor_; }

 private:
  void Reset();

  Tensor tensor_;
  Backend* owner_ = nullptr;
};

// One row's outcome of Backend::SampleTokens.
struct SampledToken {
  TokenId token = -1;  // the next token when status is OK
  Status status;       // InvalidArgument when every token of the row was -inf or masked
};

class Backend : public Ops {
 public:
  friend class Buffer;

  virtual Device device() const = 0;
  // dtype of weights and activations (F32 on CPU, BF16 on CUDA).
  virtual DType compute_dtype() const = 0;

  // A zero-filled tensor of `shape` on this device. ResourceExhausted when
  // memory runs out, InvalidArgument for a bad shape.
  virtual StatusOr<Buffer> Allocate(DType dtype, const std::vector<int64_t>& shape) = 0;
  // Copies `dst.NumBytes()` bytes from host memory `src` into `dst`.
  virtual Status CopyToDevice(const void* src, size_t num_bytes, Tensor dst) = 0;
  // Copies `src` into host memory `dst` and waits for all prior ops to finish.
  virtual Status CopyToHost(Tensor src, void* dst, size_t num_bytes) = 0;

  // Writes bytes [offset, offset + chunk.size()) of a tensor's contents into `chunk`.
  using HostFill = std::function<Status(size_t offset, std::span<std::byte> chunk)>;
  // Fills `dst` from the host chunk by chunk, for bulk uploads (weights): calls `fill`
  // for consecutive chunks covering dst.NumBytes() in order, each in host memory the
  // backend owns (dst's own memory on the CPU, pinned staging on a GPU, where the
  // copy of one chunk overlaps the fill of the next), and stops at the first error
  // `fill` returns. Chunk offsets are multiples of 256 bytes. Later ops see the
  // contents; the copies may still be in flight when it returns. The default fills a
  // host chunk and copies it with CopyToDevice.
  virtual Status FillDevice(Tensor dst, const HostFill& fill);

  // Bytes of scratch PagedAttention needs for any step within `max_shape`
  // (its sizes and host scalars at their maximum; pointers ignored). The
  // caller allocates it once (plan/run split, CUDA-graph friendly).
  virtual size_t AttentionWorkspaceBytes(const PagedAttentionParams& max_shape) const { return 0; }

  // Bytes of scratch FusedDecodeStep needs for `config` over a cache of `layout` with
  // contexts up to `max_model_len`; 0 when this backend has no fused decode step for that
  // model (the default).
  virtual size_t FusedDecodeWorkspaceBytes(const model::ModelConfig& config, const kv_cache::KvLayout& layout,
                                           int max_model_len) const {
    return 0;
  }
  // Runs the whole decode step `p` as one unit (CUDA: one persistent kernel, see
  // common/kernels/decode_step.h) and returns true, or returns false without doing
  // anything when it does not take this step (batch too large, a shape it lacks, turned
  // off); the caller then runs the step op by op. Writes the new tokens' K/V into the
  // cache and p.logits, as the op-by-op forward does, to bf16 rounding.
  virtual StatusOr<bool> FusedDecodeStep(const FusedDecodeParams& p) { return false; }

  // Hooks around one step's forward. `decode_only`: every chunk is a single
  // decode token, so a backend may record the step and replay it as a CUDA
  // graph. EndStep launches whatever was recorded; AbortStep (after a failed
  // forward) drops it. Defaults do nothing.
  virtual Status BeginStep(bool decode_only) { return Status::Ok(); }
  virtual Status EndStep() { return Status::Ok(); }
  // Drops a step whose forward failed, launching nothing recorded.
  virtual void AbortStep() {}

  // KV tier storage for `device_pool` (laid out by `layout`) with
  // `num_host_blocks` host blocks, when this backend has one better than a
  // copy through CopyToHost/CopyToDevice (async copies on a GPU); nullptr
  // when it has none.
  virtual StatusOr<std::unique_ptr<kv_cache::KvTierStorage>> CreateKvTierStorage(
      Tensor device_pool, const kv_cache::KvLayout& layout, int num_host_blocks) {
    return std::unique_ptr<kv_cache::KvTierStorage>();
  }

  // A copy queue for this backend. The default copies synchronously through
  // CopyToHost (every fence is ready at once).
  virtual StatusOr<std::unique_ptr<HostCopyQueue>> CreateHostCopyQueue();
  // Page-locks [data, data + num_bytes) so async copies into it do not stall
  // the host; Unpin before freeing it. No-ops where copies are synchronous.
  virtual Status PinHostMemory(void* data, size_t num_bytes) { return Status::Ok(); }
  virtual void UnpinHostMemory(void* data) {}

  // The next token of each row of `logits` (F32 [rows, vocab] on this device,
  // contiguous), picked as Sampler::Sample picks it for requests[row]
  // (sampling_params.h). out[row] gets the token, or a non-OK status when that
  // row had no token left (every logit NaN, -inf or masked): only that request
  // fails. The returned Status fails the whole call (bad shapes or params, a
  // device error); `out` is then unspecified. REQUIRES: rows == requests.size()
  // == out.size(); the spans inside each request stay valid for the call.
  // `logits` may be overwritten (a GPU applies penalties in place). The default
  // copies the logits to the host and runs Sampler. A backend that samples on
  // its device keeps the semantics: the same greedy picks, and draws from the
  // same distribution (the random numbers may differ from Sampler's).
  virtual Status SampleTokens(Tensor logits, std::span<const SampleRequest> requests, std::span<SampledToken> out);

 protected:
  // Linear `p` with its options as separate ops, for backends (or shapes) without fused
  // forms: product(q) computes q, a LinearParams without options (into p.scratch with
  // silu_mul), then SiluAndMul, then RmsNorm of out into norm_out (not deferred).
  // REQUIRES: p checked, p.x_norm not deferred.
  Status LinearAsOps(const LinearParams& p, const std::function<Status(const LinearParams&)>& product);

  // Releases memory from Allocate. Called by Buffer only.
  virtual void Free(void* data) = 0;
  // InvalidArgument unless `logits` is F32 [requests.size(), vocab > 0] on
  // `device`, out.size() == requests.size() and every request has params.
  static Status CheckSampleArgs(const Tensor& logits, Device device, std::span<const SampleRequest> requests,
                                std::span<const SampledToken> out);

 private:
  // State of the default SampleTokens.
  Sampler host_sampler_;
  std::vector<float> host_logits_;  // logits copied off the device (reused)
};

}  // namespace tandem::runtime
