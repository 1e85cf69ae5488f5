#include "common/node/kv_layer_copy.h"

#include "common/kv_cache/block_runs.h"

namespace tandem::node {
namespace {

// Calls copy(pool_ptr, host_ptr, bytes) once per run of the layer.
template <typename Copy>
Status ForEachRun(const KvPoolSide& pool, const KvPoolSide& host, int layer, Copy copy) {
  if (pool.blocks.size() != host.blocks.size()) return InvalidArgumentError("layer copy: block lists differ in size");
  const size_t block_bytes = pool.layout->BytesPerBlockLayer();
  if (block_bytes != host.layout->BytesPerBlockLayer()) return InvalidArgumentError("layer copy: block sizes differ");
  for (const kv_cache::BlockRunPair& run : kv_cache::PairedBlockRuns(pool.blocks, host.blocks)) {
    TANDEM_RETURN_IF_ERROR(copy(pool.base + pool.layout->BlockOffset(layer, run.src_block),
                                host.base + host.layout->BlockOffset(layer, run.dst_block),
                                block_bytes * static_cast<size_t>(run.num_blocks)));
  }
  return Status::Ok();
}

runtime::Tensor Bytes(std::byte* data, runtime::Device device, size_t n) {
  return runtime::Tensor(data, DType::kU8, device, {static_cast<int64_t>(n)});
}

}  // namespace

Status EnqueueLayerToHost(runtime::HostCopyQueue& queue, runtime::Device device, const KvPoolSide& pool,
                          const KvPoolSide& host, int layer) {
  return ForEachRun(pool, host, layer, [&](std::byte* src, std::byte* dst, size_t n) {
    return queue.Enqueue(Bytes(src, device, n), dst, n);
  });
}

Status EnqueueLayerToDevice(runtime::HostCopyQueue& queue, runtime::Device device, const KvPoolSide& host,
                            const KvPoolSide& pool, int layer) {
  return ForEachRun(pool, host, layer, [&](std::byte* dst, std::byte* src, size_t n) {
    return queue.EnqueueToDevice(src, Bytes(dst, device, n), n);
  });
}

}  // namespace tandem::node
