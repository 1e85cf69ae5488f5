// ParseGenerationConfig / LoadGenerationConfig: `generation_config.json`.
#include <exception>

#include "common/model/json_fields.h"
#include "common/model/json_limits.h"
#include "common/model/model_config.h"

namespace tandem::model {
namespace {

constexpr size_t kMaxBytes = 1 << 20;
constexpr int kMaxDepth = 16;
constexpr const char* kWhat = "generation_config.json";

StatusOr<GenerationConfig> ParseJson(const nlohmann::json& root) {
  if (!root.is_object()) return InvalidArgumentError(std::string(kWhat) + ": top level must be a JSON object");
  JsonFields f(root, kWhat);
  GenerationConfig g;
  TANDEM_RETURN_IF_ERROR(f.IntList("eos_token_id", &g.eos_token_ids));
  TANDEM_RETURN_IF_ERROR(f.Int("bos_token_id", &g.bos_token_id));
  TANDEM_RETURN_IF_ERROR(f.Double("temperature", &g.temperature));
  TANDEM_RETURN_IF_ERROR(f.Double("top_p", &g.top_p));
  TANDEM_RETURN_IF_ERROR(f.Int("top_k", &g.top_k));
  TANDEM_RETURN_IF_ERROR(f.Double("min_p", &g.min_p));
  TANDEM_RETURN_IF_ERROR(f.Double("repetition_penalty", &g.repetition_penalty));
  TANDEM_RETURN_IF_ERROR(f.Int("max_new_tokens", &g.max_new_tokens));
  TANDEM_RETURN_IF_ERROR(f.Bool("do_sample", &g.do_sample));
  if (g.temperature && *g.temperature < 0) return f.Error("temperature", "must be >= 0");
  if (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1)) return f.Error("top_p", "must be in (0, 1]");
  if (g.top_k && *g.top_k < 0) return f.Error("top_k", "must be >= 0");
  if (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1)) return f.Error("min_p", "must be in [0, 1]");
  if (g.repetition_penalty && !(*g.repetition_penalty > 0)) return f.Error("repetition_penalty", "must be > 0");
  if (g.max_new_tokens && *g.max_new_tokens < 0) return f.Error("max_new_tokens", "must be >= 0");
  for (int id : g.eos_token_ids) {
    if (id < 0) return f.Error("eos_token_id", "must not be negative");
  }
  if (g.bos_token_id && *g.bos_token_id < 0) return f.Error("bos_token_id", "must not be negative");
  return g;
}

}  // namespace

StatusOr<GenerationConfig> ParseGenerationConfig(std::string_view json_text) {
  TANDEM_ASSIGN_OR_RETURN(nlohmann::json root, ParseJsonText(json_text, kMaxBytes, kMaxDepth, kWhat));
  try {
    return ParseJson(root);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(kWhat) + ": " + e.what());
  }
}

StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& dir) {
  StatusOr<std::string> text = ReadFileToString(dir + "/generation_config.json", kMaxBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return GenerationConfig{};
    return text.status();
  }
  StatusOr<GenerationConfig> config = ParseGenerationConfig(*text);
  if (!config.ok()) return config.status().WithContext(dir);
  return config;
}

}  // namespace tandem::model
