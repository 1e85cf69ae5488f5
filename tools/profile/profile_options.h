// ProfileOptions: what tandem-profile measures beyond the node configuration it
// profiles (NodeConfig: the engine, its KV pools and scheduler limits, the UCX
// transport list): the grids, repetitions and the output file. Each field is a
// flag and a config key (ConfigBinder), except `quick`: a bare --quick flag
// (main) that caps the grids to a run of seconds for tests and CI.
// Thread rule: plain value type.
#pragma once

#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/config/config_binder.h"

namespace tandem::tools {

struct ProfileOptions {
  // Where the JSON profile goes.
  std::string output = "profile.json";
  // Small grids (caps every grid field below to its quick value): a run of seconds
  // on the CPU backend with the tiny model, for tests and CI. Not for planning.
  bool quick = false;
  // Seed of the random prompt tokens (the same seed gives the same prompts).
  int seed = 1;
  // Log level of the engine's own lines (stderr): trace, debug, info, warn, error.
  std::string log_level = "warn";

  // Prefill grid: prompt lengths min_tokens, 2·min_tokens, ... up to max_tokens,
  // each alone and as 2, 4, ... requests submitted together while they fit one
  // step's token budget (scheduler.max_num_batched_tokens), up to max_requests.
  int prefill_min_tokens = 64;
  int prefill_max_tokens = 32768;
  int prefill_max_requests = 8;
  // Timed runs per prefill point (median), after one untimed warm-up run.
  int prefill_repetitions = 3;

  // Decode grid: batch 1, 2, 4, ... up to max_batch (and scheduler.max_num_seqs),
  // each at contexts min_context, 4·min_context, ... up to max_context.
  int decode_max_batch = 256;
  int decode_min_context = 128;
  int decode_max_context = 8192;
  // Points whose batch × context exceeds this many KV tokens are left out (their
  // prefill takes long); 0: only the device pool bounds them.
  int64_t decode_max_kv_tokens = 0;
  // Decode steps timed per point (median), after warm-up steps (CUDA graph capture).
  int decode_steps = 8;
  int decode_warmup_steps = 2;
  int decode_repetitions = 3;

  // KV transfer paths measured (transfer_probe.h): "local" (in-process memcpy
  // transport), "ucx" (UCX over ucx_transports, host memory) and "cuda_ipc" (a CUDA
  // engine's device memory), the last two across two processes; the build's.
  std::vector<std::string> transfer_transports = {"local", "ucx", "cuda_ipc"};
  // Request sizes 1, 4, 16, ... blocks up to max_blocks, contiguous and scattered.
  int transfer_max_blocks = 256;
  // Timed sessions per transfer point (median), after one warm-up session.
  int transfer_repetitions = 5;

  void Bind(config::ConfigBinder& b);
  // InvalidArgument naming the first bad field.
  Status Validate() const;
  // With quick: every grid field capped to its quick value (explicit smaller values stay).
  void ApplyQuick();
};

}  // namespace tandem::tools
