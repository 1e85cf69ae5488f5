// The `post_processor` section of tokenizer.json, single-sequence form: adds
// bos/eos-style special tokens around the encoded ids when the caller asks for
// special tokens. Supported: TemplateProcessing, ByteLevel (no effect on ids),
// RobertaProcessing, BertProcessing, Sequence. Immutable; thread-safe.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/ids.h"
#include "common/base/status.h"

namespace tandem::tokenizer {

class PostProcessor {
 public:
  static StatusOr<PostProcessor> FromJson(const nlohmann::json& spec);

  // Returns `ids` wrapped by the template (identity when there is none).
  std::vector<TokenId> Apply(std::vector<TokenId> ids) const;

 private:
  static Status Parse(const nlohmann::json& spec, int depth, PostProcessor* out);
  bool has_template_ = false;
  std::vector<TokenId> prefix_, suffix_;
};

}  // namespace tandem::tokenizer
