// Profile: what tandem-profile measured for one node configuration (model,
// backend, device, KV size, scheduler limits), the input of the capacity
// planner (tandem-plan) and its simulator. Every number comes from the real
// engine and the project's own KV transports. docs/planner.md describes each
// field; profile_io.h reads and writes it as JSON, profile_origin.h checks
// that a profile belongs to the code and device it is used for.
// Units: seconds, tokens, bytes. Thread rule: plain value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace tandem::planner {

// The format this build reads and writes; a profile of another version is refused.
inline constexpr int kProfileFormatVersion = 1;

struct DeviceInfo {
  std::string backend;       // "cpu" or "cuda"
  int ordinal = 0;           // CUDA device ordinal (0 on the CPU)
  std::string name;          // "NVIDIA H200", the CPU's model name, ...
  int64_t memory_bytes = 0;  // the GPU's memory, or the host's RAM for the CPU backend
  int compute_units = 0;     // streaming multiprocessors, or hardware threads for the CPU backend
};

// The model's identity and the shape the cost models scale with.
struct ModelInfo {
  std::string id;            // the served model name (EngineConfig::model_name)
  std::string architecture;  // config.json's, e.g. "LlamaForCausalLM"
  int num_layers = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  std::string kv_dtype;  // element type of the KV cache on this backend ("f32", "bf16")
};

// The engine configuration measured (EngineConfig / SchedulerConfig fields).
struct EngineSettings {
  int block_size = 0;
  int num_device_blocks = 0;
  int num_host_blocks = 0;
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_prefill_chunk_tokens = 0;
  int max_model_len = 0;  // after the engine capped it by the model's context
  bool enable_prefix_caching = true;
};

struct KvCapacity {
  int64_t bytes_per_token = 0;  // all layers, K and V
  int64_t device_tokens = 0;    // num_device_blocks × block_size
  int64_t host_tokens = 0;      // num_host_blocks × block_size (swap and demotion tier)
};

// `requests` prompts of `prompt_tokens` each, submitted together, computed
// with max_tokens 1 (as a prefill node does): wall time of the engine steps from
// the first until every prompt has its first token, median over the repetitions.
// The repetitions are rounds over the whole grid, so that a drift of the host's
// speed while profiling shows as spread rather than bending the grid's shape.
struct PrefillPoint {
  int prompt_tokens = 0;
  int requests = 0;
  int steps = 0;  // engine steps it took (chunked prefill: more than one)
  double seconds = 0;
  double spread = 0;  // (slowest − fastest) / median over the repetitions; 0 with one
};

struct PrefillProfile {
  int repetitions = 0;               // rounds over the grid
  std::vector<PrefillPoint> points;  // by requests, then prompt_tokens
  std::vector<std::string> capped;   // what the grid left out and why (context, KV pool, token budget)
};

// Decode-only steps of `batch` sequences prefilled to `context_tokens`, in
// rounds over the grid as prefill's points are.
struct DecodePoint {
  int batch = 0;
  int context_tokens = 0;   // prompt length of each sequence
  double kv_tokens = 0;     // Σ tokens in the KV cache over the batch, mean over the timed steps
  double step_seconds = 0;  // wall time of one engine step (schedule, forward, sample): median over the
                            // timed steps of a round, then over the rounds
  double spread = 0;        // (slowest − fastest) / median of the rounds' step times; 0 with one round
};

// step_seconds ≈ intercept + per_sequence × batch + per_kv_token × kv_tokens,
// fitted by least squares on relative error with non-negative coefficients.
struct DecodeFit {
  double intercept_seconds = 0;
  double per_sequence_seconds = 0;
  double per_kv_token_seconds = 0;
  double r2 = 0;
  double max_relative_error = 0;
  double mean_relative_error = 0;

  double StepSeconds(double batch, double kv_tokens) const {
    return intercept_seconds + per_sequence_seconds * batch + per_kv_token_seconds * kv_tokens;
  }
};

struct DecodeProfile {
  int timed_steps = 0;  // steps timed per point and round
  int repetitions = 1;  // rounds over the grid
  std::vector<DecodePoint> points;
  DecodeFit fit;
  std::vector<std::string> capped;
};

// One request's KV (every layer) moved by a KvSender into a KvReceiver's landing
// memory, from Open to both sides done, median over the repetitions.
struct TransferPoint {
  int blocks = 0;     // KV blocks of the request
  int runs = 0;       // write operations: Σ over layers of contiguous block runs
  int64_t bytes = 0;  // blocks × layers × bytes per block and layer
  double seconds = 0;
};

// seconds ≈ fixed + per_run × runs + bytes / bytes_per_second (least squares,
// relative error, non-negative).
struct TransferFit {
  double fixed_seconds = 0;
  double per_run_seconds = 0;
  double bytes_per_second = 0;
  double r2 = 0;
  double max_relative_error = 0;
  double mean_relative_error = 0;

  double Seconds(double runs, double bytes) const {
    return fixed_seconds + per_run_seconds * runs + bytes / bytes_per_second;
  }
};

struct TransferPath {
  std::string transport;  // "local", "ucx", ...
  std::string options;    // transport settings that matter (UCX: its transport list)
  std::string memory;     // "host to host": where source and landing memory live
  std::string note;       // how it was measured (same process, two processes, ...)
  std::vector<TransferPoint> points;
  TransferFit fit;
};

struct TransferProfile {
  std::vector<TransferPath> paths;
  std::vector<std::string> left_out;  // paths this build or run did not measure, and why
};

struct Profile {
  int format_version = kProfileFormatVersion;
  std::string commit;   // BuildCommit() of tandem-profile
  std::string version;  // BuildVersion()
  std::string date;     // UTC, ISO 8601 ("2026-12-05T10:00:00Z")
  bool quick = false;   // made with --quick (a small grid for tests and CI)
  DeviceInfo device;
  ModelInfo model;
  EngineSettings engine;
  KvCapacity kv_capacity;
  PrefillProfile prefill;
  DecodeProfile decode;
  TransferProfile transfer;
};

// InvalidArgument naming the first field that is missing, out of range or
// inconsistent (e.g. device_tokens ≠ num_device_blocks × block_size, a fit
// with a non-finite coefficient, two prefill points of the same shape).
Status ValidateProfile(const Profile& profile);

// How far the repetitions of the engine's points (prefill and decode) disagreed:
// the host's own noise while it was profiled, below which no prediction from the
// profile can be trusted.
struct ProfileSpread {
  int points = 0;     // points measured more than once
  double max = 0;     // largest PrefillPoint/DecodePoint::spread
  double median = 0;  // median of them
  std::string where;  // the point of the largest ("prefill 4 × 512", "decode 32 at 512")
};
ProfileSpread MeasurementSpread(const Profile& profile);

// Above this median spread the profile's host moved while it was measured (one
// point's spread alone may be a short point's jitter): a profile to measure
// again (tandem-profile and tandem-plan say so).
inline constexpr double kNoisyProfileSpread = 0.05;

// That warning ("the repetitions of half the points disagreed by more than 8 % ...") when
// MeasurementSpread(profile).median is above kNoisyProfileSpread; empty otherwise.
std::string NoisyProfileWarning(const Profile& profile);

}  // namespace tandem::planner
