// Writes random weights for a ModelConfig as Hugging Face safetensors: one
// `model.safetensors`, or `model-0000i-of-0000n.safetensors` shards plus
// `model.safetensors.index.json` when the total exceeds the shard size.
// Streams tensor by tensor in chunks, so memory stays small for any model size.
//
// Values: linear weights and embeddings ~ N(0, std); biases ~ N(0, std);
// RMSNorm weights ~ 1 + N(0, norm_std). Each chunk of each tensor has its own
// random stream derived from (seed, tensor name, chunk index), so the output is
// deterministic for a seed and independent of the number of threads.
// Thread rule: the call uses `num_threads` workers internally; not reentrant on one dir.
#pragma once

#include <cstdint>
#include <string>

#include "common/base/status.h"
#include "common/model/model_config.h"

namespace tandem::tools {

struct WeightWriterOptions {
  uint64_t seed = 0;                         // random seed; same seed, same bytes
  float std = 0.02f;                         // std of linear, embedding and bias weights
  float norm_std = 0.05f;                    // spread of RMSNorm weights around 1.0
  uint64_t max_shard_bytes = 5'000'000'000;  // start a new shard past this many bytes
  int num_threads = 1;                       // generator threads (output does not depend on it)
};

struct WeightWriterResult {
  uint64_t num_parameters = 0;
  uint64_t num_bytes = 0;  // tensor bytes over all files
  int num_files = 0;
};

// Writes the weights of `config` (dtype config.dtype) into existing directory `dir`.
StatusOr<WeightWriterResult> WriteRandomWeights(const model::ModelConfig& config, const WeightWriterOptions& options,
                                                const std::string& dir);

}  // namespace tandem::tools
