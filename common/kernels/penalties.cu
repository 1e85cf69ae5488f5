#include "common/kernels/penalties.h"

#include <cmath>
#include <string>

#include "common/cuda/cuda_status.h"

namespace tandem::kernels {
namespace {

constexpr int kPenaltyThreads = 256;
constexpr int kSanitizeThreads = 256;
constexpr int kRejectThreads = 128;

// One block per listed row, threads stride over its entries. Tokens are distinct within a
// row, so no two threads touch the same logit. The _rn intrinsics keep nvcc from fusing a
// multiply and an add: the host sampler rounds each operation on its own.
__global__ void __launch_bounds__(kPenaltyThreads) ApplyPenaltiesKernel(PenaltyParams p) {
  const PenaltyRow r = p.rows[blockIdx.x];
  float* row = p.logits + static_cast<int64_t>(r.row) * p.logits_stride;
  const bool repetition = r.repetition_penalty != 1.f;
  const bool additive = r.presence_penalty != 0.f || r.frequency_penalty != 0.f;
  for (int k = threadIdx.x; k < r.num_entries; k += blockDim.x) {
    const PenaltyEntry e = p.entries[r.entry_begin + k];
    float l = row[e.token];
    if (isnan(l)) l = -INFINITY;
    if (repetition && ((e.flags & kPenaltyInPrompt) != 0 || e.output_count > 0)) {
      l = l > 0.f ? __fdiv_rn(l, r.repetition_penalty) : __fmul_rn(l, r.repetition_penalty);
    }
    if (additive && e.output_count > 0) {
      const float penalty =
          __fadd_rn(__fmul_rn(r.frequency_penalty, static_cast<float>(e.output_count)), r.presence_penalty);
      l = __fsub_rn(l, penalty);
    }
    l = __fadd_rn(l, e.bias);
    if ((e.flags & kPenaltyMask) != 0) l = -INFINITY;
    row[e.token] = l;
  }
}

// Grid (column blocks, row blocks); both dimensions stride. Writes only where a NaN is.
__global__ void __launch_bounds__(kSanitizeThreads) SanitizeLogitsKernel(SanitizeLogitsParams p) {
  for (int r = blockIdx.y; r < p.num_rows; r += gridDim.y) {
    float* row = p.logits + static_cast<int64_t>(r) * p.logits_stride;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.vocab; i += gridDim.x * blockDim.x) {
      if (isnan(row[i])) row[i] = -INFINITY;
    }
  }
}

__global__ void __launch_bounds__(kRejectThreads) RejectMaskedTokensKernel(RejectMaskedParams p) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= p.num_rows) return;
  const int32_t t = p.tokens[r];
  // `!(l > -inf)` is true for -inf and for NaN.
  if (t < 0 || t >= p.vocab || !(p.logits[static_cast<int64_t>(r) * p.logits_stride + t] > -INFINITY)) {
    p.tokens[r] = -1;
  }
}

Status ValidateRows(const void* logits, int64_t stride, int rows, int vocab, const char* what) {
  if (logits == nullptr) return InvalidArgumentError(std::string(what) + ": null logits");
  if (rows < 0 || vocab <= 0 || stride < vocab) {
    return InvalidArgumentError(std::string(what) + ": need rows >= 0, vocab > 0, stride >= vocab");
  }
  return Status::Ok();
}

}  // namespace

Status LaunchApplyPenalties(const PenaltyParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateRows(p.logits, p.logits_stride, p.num_logits_rows, p.vocab, "ApplyPenalties"));
  if (p.num_rows < 0 || p.num_rows > p.num_logits_rows) {
    return InvalidArgumentError("ApplyPenalties: num_rows out of [0, num_logits_rows]");
  }
  if (p.num_rows == 0) return Status::Ok();
  if (p.rows == nullptr || p.entries == nullptr) return InvalidArgumentError("ApplyPenalties: null lists");
  ApplyPenaltiesKernel<<<p.num_rows, kPenaltyThreads, 0, stream>>>(p);
  return cuda::LastLaunchStatus("ApplyPenaltiesKernel");
}

Status LaunchSanitizeLogits(const SanitizeLogitsParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateRows(p.logits, p.logits_stride, p.num_rows, p.vocab, "SanitizeLogits"));
  if (p.num_rows == 0) return Status::Ok();
  // About 4 elements per thread: a 128256 vocab takes 126 blocks per row.
  const int per_block = kSanitizeThreads * 4;
  const dim3 grid((p.vocab + per_block - 1) / per_block, p.num_rows < 65535 ? p.num_rows : 65535);
  SanitizeLogitsKernel<<<grid, kSanitizeThreads, 0, stream>>>(p);
  return cuda::LastLaunchStatus("SanitizeLogitsKernel");
}

Status LaunchRejectMaskedTokens(const RejectMaskedParams& p, cudaStream_t stream) {
  TANDEM_RETURN_IF_ERROR(ValidateRows(p.logits, p.logits_stride, p.num_rows, p.vocab, "RejectMaskedTokens"));
  if (p.tokens == nullptr) return InvalidArgumentError("RejectMaskedTokens: null tokens");
  if (p.num_rows == 0) return Status::Ok();
  RejectMaskedTokensKernel<<<(p.num_rows + kRejectThreads - 1) / kRejectThreads, kRejectThreads, 0, stream>>>(p);
  return cuda::LastLaunchStatus("RejectMaskedTokensKernel");
}

}  // namespace tandem::kernels
