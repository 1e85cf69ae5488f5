// The Hugging Face fixtures in tests/data/golden/<family> (made by
// tools/golden/make_golden.py): model config, weights (float32 on disk, every
// value an exact bf16), and golden.safetensors with HF's greedy ids and logits.
// One reader for the CPU golden test, the CUDA runtime tests and the engine tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/weights.h"

namespace tandem::runtime::testing {

// $TANDEM_SOURCE_DIR/tests/data/golden/<family> (the working directory when unset).
std::string GoldenDir(const std::string& family);

// I64 tensor `name` of <dir>/golden.safetensors ("prompt_ids", "decode_ids") as ids.
std::vector<int32_t> ReadGoldenIds(const std::string& dir, const std::string& name);

struct GoldenData {
  explicit GoldenData(const std::string& family);
  model::ModelConfig config;
  std::unique_ptr<model::ModelWeights> weights;
  std::vector<int32_t> prompt, decode;         // HF's prompt and greedy continuation
  std::vector<float> prefill_ref, decode_ref;  // HF's logits [rows, vocab]
};

}  // namespace tandem::runtime::testing
