// libFuzzer target: arbitrary bytes as config.json and generation_config.json.
// Parsing returns a Status and never crashes; an accepted config validates.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/base/check.h"
#include "common/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tandem::StatusOr<tandem::model::ModelConfig> config = tandem::model::ParseModelConfig(text);
  if (config.ok()) TANDEM_CHECK(config->Validate().ok());
  tandem::model::ParseGenerationConfig(text).status().IgnoreError();
  return 0;
}
