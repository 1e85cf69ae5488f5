#include "bench/model/variant_backend.h"

#include "common/base/check.h"

namespace tandem::bench {

using runtime::LinearParams;
using runtime::PagedAttentionParams;
using runtime::RmsNormParams;
using runtime::RopeKvWriteParams;
using runtime::Tensor;

Status VariantBackend::Embedding(Tensor ids, Tensor table, Tensor out) {
  return gemms_only() ? Status::Ok() : cuda_->Embedding(ids, table, out);
}

Status VariantBackend::RmsNorm(const RmsNormParams& p) { return gemms_only() ? Status::Ok() : cuda_->RmsNorm(p); }

Status VariantBackend::Linear(const LinearParams& p) {
  const bool split_silu = p.silu_mul && (variant_ == OpVariant::kSiluKernel || gemms_only());
  if (!split_silu) return cuda_->Linear(p);
  // The gate/up projection into its scratch, then (unless GEMMs only) the SiLU-mul kernel.
  TANDEM_RETURN_IF_ERROR(cuda_->Linear({.x = p.x, .weight = p.weight, .bias = p.bias, .out = p.scratch}));
  return gemms_only() ? Status::Ok() : cuda_->SiluAndMul(p.scratch, p.out);
}

Status VariantBackend::RopeKvWrite(const RopeKvWriteParams& p) {
  return gemms_only() ? Status::Ok() : cuda_->RopeKvWrite(p);
}

Status VariantBackend::PagedAttention(const PagedAttentionParams& p) {
  if (gemms_only() || variant_ == OpVariant::kNoAttention) return Status::Ok();
  return cuda_->PagedAttention(p);
}

Status VariantBackend::RopeKvWriteAndAttention(const RopeKvWriteParams& rope, const PagedAttentionParams& attn) {
  switch (variant_) {
    case OpVariant::kServer:
    case OpVariant::kSiluKernel: return cuda_->RopeKvWriteAndAttention(rope, attn);
    case OpVariant::kUnfusedRope: TANDEM_RETURN_IF_ERROR(cuda_->RopeKvWrite(rope)); return cuda_->PagedAttention(attn);
    case OpVariant::kNoAttention: return cuda_->RopeKvWrite(rope);
    case OpVariant::kGemmsOnly: return Status::Ok();
  }
  return InternalError("VariantBackend: unknown variant");
}

Status VariantBackend::SiluAndMul(Tensor gate_up, Tensor out) {
  return gemms_only() ? Status::Ok() : cuda_->SiluAndMul(gate_up, out);
}

Status VariantBackend::GatherRows(Tensor src, Tensor indices, Tensor out) {
  return gemms_only() ? Status::Ok() : cuda_->GatherRows(src, indices, out);
}

void VariantBackend::Free(void* data) {
  TANDEM_CHECK(false) << "VariantBackend::Free: buffers belong to the wrapped CudaBackend";
}

}  // namespace tandem::bench
