#include "common/cuda/kv_tier_storage_cuda.h"

#include <string>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kv_block_copy.h"

namespace tandem::cuda {

using kv_cache::BlockCopy;
using kv_cache::KvTier;

StatusOr<std::unique_ptr<CudaKvTierStorage>> CudaKvTierStorage::Create(void* device_pool,
                                                                       const kv_cache::KvLayout& device_layout,
                                                                       int num_host_blocks, cudaStream_t compute_stream,
                                                                       size_t copy_engine_min_bytes) {
  TANDEM_RETURN_IF_ERROR(device_layout.Validate());
  if (device_pool == nullptr || num_host_blocks < 0) {
    return InvalidArgumentError("CudaKvTierStorage: null device pool or negative host blocks");
  }
  std::unique_ptr<CudaKvTierStorage> s(new CudaKvTierStorage());
  s->device_ = static_cast<std::byte*>(device_pool);
  s->device_layout_ = device_layout;
  s->host_layout_ = device_layout;
  s->host_layout_.num_blocks = num_host_blocks;
  TANDEM_ASSIGN_OR_RETURN(s->host_, PinnedBuffer::Allocate(s->host_layout_.TotalBytes()));
  s->compute_stream_ = compute_stream;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&s->copy_stream_, cudaStreamNonBlocking));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&s->compute_done_, cudaEventDisableTiming));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&s->copies_done_, cudaEventDisableTiming));
  s->copy_engine_min_bytes_ = copy_engine_min_bytes;
  s->batch_ = std::make_unique<kernels::KvBlockCopyParams>();
  s->device_marks_.assign(device_layout.num_blocks, 0);
  s->host_marks_.assign(num_host_blocks, 0);
  return s;
}

CudaKvTierStorage::~CudaKvTierStorage() {
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
  if (copies_done_ != nullptr) cudaEventDestroy(copies_done_);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
}

std::byte* CudaKvTierStorage::Address(KvTier tier, int layer, BlockId block) {
  if (tier == KvTier::kDevice) return device_ + device_layout_.BlockOffset(layer, block);
  return host_.as<std::byte>() + host_layout_.BlockOffset(layer, block);
}

std::byte* CudaKvTierStorage::HostBlock(int layer, BlockId block) { return Address(KvTier::kHost, layer, block); }

Status CudaKvTierStorage::ExecuteCopies(std::span<const BlockCopy> copies) {
  auto in_range = [&](KvTier tier, BlockId b) {
    const int n = tier == KvTier::kDevice ? device_layout_.num_blocks : host_layout_.num_blocks;
    return b >= 0 && b < n;
  };
  for (const BlockCopy& c : copies) {
    if (!in_range(c.src_tier, c.src_block) || !in_range(c.dst_tier, c.dst_block)) {
      return InvalidArgumentError("block copy out of range: " + std::to_string(c.src_block) + " -> " +
                                  std::to_string(c.dst_block));
    }
  }
  if (copies.empty()) return Status::Ok();
  // After the forward passes queued so far (they read and write the device tier) ...
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(compute_done_, compute_stream_));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(copy_stream_, compute_done_, 0));
  const size_t block_bytes = device_layout_.BytesPerBlockLayer();
  // Short cross-tier runs gather into one kernel launch (`batch`), one direction at a time
  // and no destination twice, so its pieces can run in any order; it is launched before
  // anything queued after it, which keeps list order.
  auto& batch = *batch_;
  batch.count = 0;
  KvTier batch_from = KvTier::kDevice;  // the batch's source tier (its destination is the other)
  marked_.clear();
  auto flush = [&]() -> Status {
    if (batch.count == 0) return Status::Ok();
    for (const BlockCopy& m : marked_) (m.dst_tier == KvTier::kDevice ? device_marks_ : host_marks_)[m.dst_block] = 0;
    marked_.clear();
    const Status launched = kernels::LaunchKvBlockCopy(batch, copy_stream_);
    batch.count = 0;
    return launched;
  };
  for (size_t i = 0; i < copies.size();) {
    // A run of copies between two different tiers with consecutive source and destination
    // blocks is one contiguous region per layer (layer-major pools). Same-tier copies are
    // never merged: their ranges may overlap, and list order must hold.
    const BlockCopy& c = copies[i];
    size_t run = 1;
    if (c.src_tier != c.dst_tier) {
      while (i + run < copies.size() && copies[i + run].src_tier == c.src_tier &&
             copies[i + run].dst_tier == c.dst_tier &&
             copies[i + run].src_block == c.src_block + static_cast<BlockId>(run) &&
             copies[i + run].dst_block == c.dst_block + static_cast<BlockId>(run)) {
        ++run;
      }
    }
    if (c.src_tier != c.dst_tier && run * block_bytes < copy_engine_min_bytes_) {
      for (size_t r = 0; r < run; ++r) {
        const BlockCopy& piece = copies[i + r];
        auto& marks = piece.dst_tier == KvTier::kDevice ? device_marks_ : host_marks_;
        const bool other_direction = batch.count > 0 && piece.src_tier != batch_from;
        if (other_direction || marks[piece.dst_block] || batch.count == kernels::kKvBlockCopyMaxPieces) {
          TANDEM_RETURN_IF_ERROR(flush());
        }
        if (batch.count == 0) {
          batch_from = piece.src_tier;
          batch.src = Address(piece.src_tier, 0, 0);
          batch.dst = Address(piece.dst_tier, 0, 0);
          batch.src_blocks = (piece.src_tier == KvTier::kDevice ? device_layout_ : host_layout_).num_blocks;
          batch.dst_blocks = (piece.dst_tier == KvTier::kDevice ? device_layout_ : host_layout_).num_blocks;
          batch.block_bytes = static_cast<int64_t>(block_bytes);
          batch.num_layers = device_layout_.num_layers;
        }
        batch.src_block[batch.count] = piece.src_block;
        batch.dst_block[batch.count] = piece.dst_block;
        ++batch.count;
        marks[piece.dst_block] = 1;
        marked_.push_back(piece);
      }
      i += run;
      continue;
    }
    TANDEM_RETURN_IF_ERROR(flush());
    for (int layer = 0; layer < device_layout_.num_layers; ++layer) {
      // cudaMemcpyDefault: unified addressing tells device and pinned host memory apart,
      // and every direction (host -> host too) runs in stream order.
      TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(Address(c.dst_tier, layer, c.dst_block),
                                                  Address(c.src_tier, layer, c.src_block), run * block_bytes,
                                                  cudaMemcpyDefault, copy_stream_));
    }
    i += run;
  }
  TANDEM_RETURN_IF_ERROR(flush());
  // ... and before the next ones.
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(copies_done_, copy_stream_));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamWaitEvent(compute_stream_, copies_done_, 0));
  return Status::Ok();
}

Status CudaKvTierStorage::Synchronize() {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(copy_stream_));
  return Status::Ok();
}

}  // namespace tandem::cuda
