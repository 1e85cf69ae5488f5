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
#include "common/runtime/ops.h"
#include "common/runtime/sampler.h"
#include "common/runtime/tensor.h"

namespace tandem::runtime {

class Backend;

// Ready once the work before it (copies, or the ops of a step) has finished.
// Ready() may be called from any thread.
class CopyFence {
 public:
  virtual ~CopyFence() = default;
  virtual bool Ready() = 0;
};

struct CopyQueueOptions {
  // true: each copy waits for every op issued on the backend before it, so it can
  // read what the forward writes (a prefill node streaming KV out layer by layer
  // while later layers compute). false: copies run on their own, for memory no
  // step touches yet (a decode node uploading landed KV into reserved blocks); the
  // queue may then be used from a thread other than the backend's.
  bool after_compute = true;
};

// Copies between device memory and host memory that overlap the forward.
// Mark returns a fence for every copy enqueued before it; copies complete in
// enqueue order. With after_compute, the copies read device memory that later
// steps may reuse, so the caller calls JoinCompute once per step after its last
// Enqueue: the backend's later ops then wait for the copies.
// Thread rule: one owner thread — the backend's with after_compute, any
// otherwise (one at a time).
class HostCopyQueue {
 public:
  virtual ~HostCopyQueue() = default;
  // Device -> host. `dst` must stay valid until a later fence is ready (pinned,
  // on a GPU: see Backend::PinHostMemory, or the copy is synchronous).
  virtual Status Enqueue(Tensor src, void* dst, size_t num_bytes) = 0;
  // Host -> device, `src` as `dst` above.
  virtual Status EnqueueToDevice(const void* src, Tensor dst, size_t num_bytes) = 0;
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
  SampledLogprobs logprobs;  // with OK status when the row's params.logprobs >= 0
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
  virtual StatusOr<std::unique_ptr<kv_cache::KvTierStorage>> CreateKvTierStorage(Tensor device_pool,
                                                                                 const kv_cache::KvLayout& layout,
                                                                                 int num_host_blocks) {
    return std::unique_ptr<kv_cache::KvTierStorage>();
  }

  // A copy queue for this backend. The default copies synchronously through
  // CopyToHost / CopyToDevice (every fence is ready at once).
  virtual StatusOr<std::unique_ptr<HostCopyQueue>> CreateHostCopyQueue(CopyQueueOptions options = {});
  // A fence that is ready once every op issued so far has finished (a GPU's
  // compute stream); ready at once where ops run synchronously. Backend's thread.
  virtual StatusOr<std::shared_ptr<CopyFence>> MarkCompute();
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

  // Prompt logprobs: per row of `logits` (F32 [rows, vocab] on this device, contiguous),
  // the raw log-softmax's value at tokens[row] (the prompt's next token) and its `k` most
  // likely tokens', as Sampler::RowLogprobs computes them at temperature 0. The default copies
  // the rows to the host. REQUIRES: rows == tokens.size() == out.size(), 0 <= k <= 20.
  virtual Status PromptLogprobs(Tensor logits, std::span<const TokenId> tokens, int k,
                                std::span<SampledLogprobs> out);

 protected:
  // Linear `p` with silu_mul as a separate op, for backends (or shapes) without the fused
  // form: product(q) computes q, a LinearParams without silu_mul (into p.scratch with
  // silu_mul), then SiluAndMul. REQUIRES: p checked.
  Status LinearAsOps(const LinearParams& p, const std::function<Status(const LinearParams&)>& product);

  // Releases memory from Allocate. Called by Buffer only.
  virtual void Free(void* data) = 0;
  // InvalidArgument unless `logits` is F32 [requests.size(), vocab > 0] on
  // `device`, out.size() == requests.size() and every request has params.
  static Status CheckSampleArgs(const Tensor& logits, Device device, std::span<const SampleRequest> requests,
                                std::span<const SampledToken> out);
  // InvalidArgument unless `logits` is F32 [tokens.size(), vocab > 0] on `device`, out has
  // as many entries and k is in [0, kMaxTopLogprobs].
  static Status CheckPromptLogprobsArgs(const Tensor& logits, Device device, std::span<const TokenId> tokens, int k,
                                        std::span<const SampledLogprobs> out);

 private:
  // State of the default SampleTokens.
  Sampler host_sampler_;
  std::vector<float> host_logits_;  // logits copied off the device (reused)
};

}  // namespace tandem::runtime
