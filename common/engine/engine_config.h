// EngineConfig: everything one node's engine needs to size itself: the
// scheduler policy, the KV cache tiers, and the runtime workspace.
// Thread rule: plain value type.
#pragma once

#include <string>

#include "common/base/status.h"
#include "common/config/config_binder.h"
#include "common/kv_cache/kv_cache_manager.h"
#include "common/runtime/llama_model.h"
#include "common/scheduler/scheduler_config.h"

namespace tandem::engine {

struct EngineConfig {
  // Hugging Face model directory (config.json, safetensors, tokenizer files).
  std::string model_dir;
  // Model runtime backend: "cpu" (fp32 reference) or "cuda" (bf16, needs a CUDA build).
  std::string backend = "cpu";
  // CUDA device ordinal for the "cuda" backend.
  int device = 0;
  // Name clients use for the model; also mixed into block hashes (with the dir's config).
  std::string model_name = "tiny";
  // Tokens per KV block (power of two). 16 is the default everywhere.
  int block_size = 16;
  // KV blocks on the device tier. 0 = derive from kv_cache_bytes.
  int num_device_blocks = 0;
  // Bytes of KV on the device tier when num_device_blocks is 0.
  int64_t kv_cache_bytes = 64ll << 20;
  // KV blocks on the host tier (swap, demotion); 0 disables the tier.
  int num_host_blocks = 256;
  // Reuse KV of identical prompt prefixes (per tenant).
  bool enable_prefix_caching = true;
  // The continuous-batching policy.
  scheduler::SchedulerConfig scheduler;

  // Registers the fields for YAML files and flags (see common/config).
  void Bind(config::ConfigBinder& b);
  Status Validate() const;
};

}  // namespace tandem::engine
