// A small valid profile for the planner's tests, built field by field (not by
// tandem-profile), so the tests of the format do not depend on measurements.
#pragma once

#include "planner/profile.h"

namespace tandem::planner::testing {

inline Profile SampleProfile() {
  Profile p;
  p.commit = "0123456789abcdef0123456789abcdef01234567";
  p.version = "0.1.0";
  p.date = "2026-12-05T10:00:00Z";
  p.device = {
      .backend = "cuda", .ordinal = 0, .name = "NVIDIA H200", .memory_bytes = 150'000'000'000, .compute_units = 132};
  p.model = {.id = "llama-3-8b",
             .architecture = "LlamaForCausalLM",
             .num_layers = 32,
             .hidden_size = 4096,
             .intermediate_size = 14336,
             .num_heads = 32,
             .num_kv_heads = 8,
             .head_dim = 128,
             .vocab_size = 128256,
             .max_position_embeddings = 131072,
             .kv_dtype = "bfloat16"};
  p.engine = {.block_size = 16,
              .num_device_blocks = 1000,
              .num_host_blocks = 100,
              .max_num_batched_tokens = 8192,
              .max_num_seqs = 256,
              .max_prefill_chunk_tokens = 2048,
              .max_model_len = 32768,
              .enable_prefix_caching = true};
  p.kv_capacity = {.bytes_per_token = 131072, .device_tokens = 16000, .host_tokens = 1600};
  p.prefill.repetitions = 3;
  p.prefill.points = {{.prompt_tokens = 64, .requests = 1, .steps = 1, .seconds = 0.004, .spread = 0.02},
                      {.prompt_tokens = 4096, .requests = 1, .steps = 2, .seconds = 0.09, .spread = 0.01},
                      {.prompt_tokens = 64, .requests = 2, .steps = 1, .seconds = 0.0045, .spread = 0.03}};
  p.prefill.capped = {"prompt_tokens 65536 and longer: over max_model_len 32768"};
  p.decode.timed_steps = 8;
  p.decode.repetitions = 3;
  p.decode.points = {{.batch = 1, .context_tokens = 128, .kv_tokens = 132, .step_seconds = 0.0041, .spread = 0.01},
                     {.batch = 8, .context_tokens = 128, .kv_tokens = 1056, .step_seconds = 0.0045, .spread = 0.0},
                     {.batch = 8, .context_tokens = 8192, .kv_tokens = 65568, .step_seconds = 0.0052, .spread = 0.04}};
  p.decode.fit = {.intercept_seconds = 0.004,
                  .per_sequence_seconds = 5e-5,
                  .per_kv_token_seconds = 1.5e-8,
                  .r2 = 0.99,
                  .max_relative_error = 0.04,
                  .mean_relative_error = 0.02};
  TransferPath path;
  path.transport = "local";
  path.memory = "host to host";
  path.note = "in-process";
  path.points = {{.blocks = 1, .runs = 32, .bytes = 2 << 20, .seconds = 0.0001},
                 {.blocks = 16, .runs = 32, .bytes = 32 << 20, .seconds = 0.003},
                 {.blocks = 16, .runs = 512, .bytes = 32 << 20, .seconds = 0.004}};
  path.fit = {.fixed_seconds = 2e-5,
              .per_run_seconds = 2e-6,
              .bytes_per_second = 1e10,
              .r2 = 0.999,
              .max_relative_error = 0.05,
              .mean_relative_error = 0.01};
  p.transfer.paths = {path};
  p.transfer.left_out = {"cuda_ipc, nccl: not measured"};
  return p;
}

}  // namespace tandem::planner::testing
