#include "common/kernels/embedding.h"

#include "common/cuda/cuda_status.h"
#include "common/kernels/kernel_util.cuh"

namespace tandem::kernels {
namespace {

__device__ __forceinline__ void Store(__nv_bfloat16* out, int i, const uint4& v) {
  reinterpret_cast<uint4*>(out)[i] = v;
}
__device__ __forceinline__ void Store(float* out, int i, const uint4& v) {
  float x[8];
  detail::Bf16x8ToFloat(v, x);
  reinterpret_cast<float4*>(out)[2 * i] = make_float4(x[0], x[1], x[2], x[3]);
  reinterpret_cast<float4*>(out)[2 * i + 1] = make_float4(x[4], x[5], x[6], x[7]);
}

template <typename OutT>
__global__ void EmbeddingKernel(EmbeddingParams p, OutT* out_base) {
  detail::AllowNextKernel();
  const int t = blockIdx.x;
  const int32_t id = p.ids[t];
  const int vecs = p.hidden / 8;
  OutT* out = out_base + static_cast<int64_t>(t) * p.hidden;
  if (id < 0 || id >= p.num_rows) {
    for (int i = threadIdx.x; i < vecs; i += blockDim.x) Store(out, i, make_uint4(0, 0, 0, 0));
    return;
  }
  const uint4* row = reinterpret_cast<const uint4*>(p.table + static_cast<int64_t>(id) * p.hidden);
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) Store(out, i, row[i]);
}

}  // namespace

Status LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.ids == nullptr || p.table == nullptr || (p.out == nullptr) == (p.out_f32 == nullptr))
    return InvalidArgumentError("Embedding: null pointer, or both or neither of out and out_f32");
  if (p.num_tokens < 0 || p.num_rows <= 0 || p.hidden <= 0 || p.hidden % 8 != 0)
    return InvalidArgumentError("Embedding: need num_tokens >= 0, num_rows > 0, hidden % 8 == 0");
  if (p.num_tokens == 0) return Status::Ok();
  int threads = p.hidden / 8 < 256 ? ((p.hidden / 8 + 31) / 32) * 32 : 256;
  // A plain launch: the first kernel of a forward follows the host->device copies of the
  // step's metadata, and a PDL launch only orders itself after the previous kernel.
  if (p.out_f32 != nullptr) {
    EmbeddingKernel<<<p.num_tokens, threads, 0, stream>>>(p, p.out_f32);
  } else {
    EmbeddingKernel<<<p.num_tokens, threads, 0, stream>>>(p, p.out);
  }
  return cuda::LastLaunchStatus("EmbeddingKernel");
}

}  // namespace tandem::kernels
