#include "common/engine/engine_config.h"

namespace tandem::engine {

void EngineConfig::Bind(config::ConfigBinder& b) {
  b.Field("model_dir", model_dir, "Hugging Face model directory");
  b.Field("model_name", model_name, "model name served to clients");
  b.Field("backend", backend, "model runtime backend: cpu | cuda");
  b.Field("device", device, "CUDA device ordinal");
  b.Field("kv.block_size", block_size, "tokens per KV block (power of two)");
  b.Field("kv.num_device_blocks", num_device_blocks, "device-tier KV blocks (0: from kv.cache_bytes)");
  b.Field("kv.cache_bytes", kv_cache_bytes, "device-tier KV bytes when num_device_blocks is 0");
  b.Field("kv.num_host_blocks", num_host_blocks, "host-tier KV blocks (0 disables the tier)");
  b.Field("kv.enable_prefix_caching", enable_prefix_caching, "reuse KV of identical prompt prefixes");
  b.Field("scheduler.max_num_batched_tokens", scheduler.max_num_batched_tokens,
          "tokens computed per step across all sequences");
  b.Field("scheduler.max_num_seqs", scheduler.max_num_seqs, "sequences in the running batch");
  b.Field("scheduler.max_prefill_chunk_tokens", scheduler.max_prefill_chunk_tokens,
          "longest prefill chunk of one sequence per step");
  b.Field("scheduler.max_model_len", scheduler.max_model_len, "longest sequence accepted (0: the model's)");
  b.Field("scheduler.max_waiting_requests", scheduler.max_waiting_requests, "queued requests at most");
  b.Field("scheduler.default_lease_ms", scheduler.default_lease_ms, "remote-KV reservation lease (ms)");
  b.Field("scheduler.reservation_quarantine_ms", scheduler.reservation_quarantine_ms,
          "blocks of an abandoned reservation stay out of reuse this long (ms): >= the sender's drain "
          "timeout + control latency");
}

Status EngineConfig::Validate() const {
  if (model_dir.empty()) return InvalidArgumentError("model_dir is required");
  if (backend != "cpu" && backend != "cuda") return InvalidArgumentError("backend must be cpu or cuda");
  if (block_size <= 0 || (block_size & (block_size - 1)) != 0) {
    return InvalidArgumentError("kv.block_size must be a power of two");
  }
  if (num_device_blocks < 0 || num_host_blocks < 0 || kv_cache_bytes < 0) {
    return InvalidArgumentError("KV block counts and bytes must be >= 0");
  }
  if (num_device_blocks == 0 && kv_cache_bytes == 0) {
    return InvalidArgumentError("set kv.num_device_blocks or kv.cache_bytes");
  }
  return Status::Ok();
}

}  // namespace tandem::engine
