// Tokenizer files for a generated model: the built-in tiny tokenizer, or real
// tokenizer files copied from a directory (with their bos/eos ids looked up).
// Thread rule: free functions, no state.
#pragma once

#include <string>

#include "common/base/status.h"
#include "common/model/model_config.h"

namespace tandem::tools {

// Writes the built-in tokenizer (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json) into `dir` and sets config->bos_token_id and
// config->eos_token_ids to its ids. InvalidArgument if config->vocab_size is
// smaller than the tokenizer.
Status WriteTinyTokenizer(const std::string& dir, model::ModelConfig* config);

// Copies tokenizer.json, tokenizer_config.json, special_tokens_map.json,
// chat_template.jinja and tokenizer.model (those that exist; tokenizer.json or
// tokenizer.model must) from `source_dir` to `dir`. Checks every id of
// tokenizer.json fits config->vocab_size; when tokenizer_config.json names a
// bos/eos token found in tokenizer.json, uses its id (keeping the preset's eos
// list when it already contains that id).
Status CopyTokenizer(const std::string& source_dir, const std::string& dir, model::ModelConfig* config);

}  // namespace tandem::tools
