// VariantBackend: a Backend for model_bench that forwards every call to a CudaBackend, as
// given (kServer: the ops the server runs) or with one kind of op changed, so that the
// benchmark times LlamaModel's own forward in every row and attributes its time by
// difference. The variants live here, in the benchmark, not behind Backend.
//
// Memory comes from the wrapped backend: the buffers it hands out belong to that backend.
// Thread rule: the engine thread of the wrapped backend, as the backend itself.
#pragma once

#include "common/runtime/backend.h"
#include "common/runtime/cuda_backend.h"

namespace tandem::bench {

enum class OpVariant {
  kServer,       // every op as the server runs it
  kUnfusedRope,  // RoPE + KV write as a kernel of its own before the attention
  kSiluKernel,   // the gate/up GEMM without the SiLU-mul epilogue, then the SiLU-mul kernel
  kNoAttention,  // the attention (and its merge) left out; RoPE + KV write as its own kernel
  kGemmsOnly,    // only the GEMMs (gate/up without the SiLU-mul epilogue)
};

class VariantBackend final : public runtime::Backend {
 public:
  // `cuda` must outlive this object.
  explicit VariantBackend(runtime::CudaBackend* cuda) : cuda_(cuda) {}

  void set_variant(OpVariant variant) { variant_ = variant; }
  OpVariant variant() const { return variant_; }

  runtime::Device device() const override { return cuda_->device(); }
  DType compute_dtype() const override { return cuda_->compute_dtype(); }
  StatusOr<runtime::Buffer> Allocate(DType dtype, const std::vector<int64_t>& shape) override {
    return cuda_->Allocate(dtype, shape);
  }
  Status CopyToDevice(const void* src, size_t num_bytes, runtime::Tensor dst) override {
    return cuda_->CopyToDevice(src, num_bytes, dst);
  }
  Status CopyToHost(runtime::Tensor src, void* dst, size_t num_bytes) override {
    return cuda_->CopyToHost(src, dst, num_bytes);
  }
  size_t AttentionWorkspaceBytes(const runtime::PagedAttentionParams& max_shape) const override {
    return cuda_->AttentionWorkspaceBytes(max_shape);
  }
  Status BeginStep(bool decode_only) override { return cuda_->BeginStep(decode_only); }
  Status EndStep() override { return cuda_->EndStep(); }
  void AbortStep() override { cuda_->AbortStep(); }

  Status Embedding(runtime::Tensor ids, runtime::Tensor table, runtime::Tensor out) override;
  Status RmsNorm(const runtime::RmsNormParams& p) override;
  Status Linear(const runtime::LinearParams& p) override;
  Status RopeKvWrite(const runtime::RopeKvWriteParams& p) override;
  Status PagedAttention(const runtime::PagedAttentionParams& p) override;
  Status RopeKvWriteAndAttention(const runtime::RopeKvWriteParams& rope,
                                 const runtime::PagedAttentionParams& attn) override;
  Status SiluAndMul(runtime::Tensor gate_up, runtime::Tensor out) override;
  Status GatherRows(runtime::Tensor src, runtime::Tensor indices, runtime::Tensor out) override;

 protected:
  // Never called: every buffer handed out belongs to the wrapped backend.
  void Free(void* data) override;

 private:
  bool gemms_only() const { return variant_ == OpVariant::kGemmsOnly; }

  runtime::CudaBackend* cuda_;
  OpVariant variant_ = OpVariant::kServer;
};

}  // namespace tandem::bench
