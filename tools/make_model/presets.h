// Named model shapes for tandem-make-model, and the JSON files written next
// to the weights (config.json, generation_config.json) in Hugging Face format.
// Thread rule: free functions, no state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"
#include "common/model/model_config.h"

namespace tandem::tools {

// "tiny", "llama3-8b", "llama3-70b", "qwen2.5-7b", "qwen3-8b", "mistral-7b".
std::vector<std::string> PresetNames();
// One line per preset for --help.
std::string DescribePresets();
// The preset's config (with real token ids for real-model shapes).
// InvalidArgument listing the presets for an unknown name.
StatusOr<model::ModelConfig> PresetConfig(std::string_view name);

// Switches `config` to `family`: architecture name, q/k/v bias on for Qwen2,
// q/k norm on for Qwen3 (off for the others).
void ApplyFamily(model::ModelFamily family, model::ModelConfig* config);
// "llama" | "mistral" | "qwen2" | "qwen3".
StatusOr<model::ModelFamily> ParseFamily(std::string_view name);

// config.json as transformers writes it for that family.
std::string ModelConfigJson(const model::ModelConfig& config);
// generation_config.json with the config's bos/eos ids (greedy by default).
std::string GenerationConfigJson(const model::ModelConfig& config);

}  // namespace tandem::tools
