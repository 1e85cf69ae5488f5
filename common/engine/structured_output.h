// StructuredOutput: an engine's side of response formats (common/grammar). It owns the
// model's vocabulary as the grammar sees it — read from the model directory's
// tokenizer.json on a background thread started with the engine, so neither start-up nor a
// step waits for it unless a request asks for structure first — and the cache of compiled
// grammars. A request's matcher gives its allowed-token mask each step; the engine computes
// the masks after the forward is issued, so on a GPU they overlap the step.
// Thread rule: engine thread only (the background load hands over through a future).
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/base/ids.h"
#include "common/base/status.h"
#include "common/grammar/grammar_cache.h"
#include "common/grammar/grammar_matcher.h"
#include "common/grammar/token_mask.h"
#include "common/grammar/token_vocabulary.h"
#include "common/runtime/sampling_params.h"

namespace tandem::engine {

class StructuredOutput {
 public:
  // Starts reading <model_dir>/tokenizer.json; `vocab_size` is the model's.
  StructuredOutput(const std::string& model_dir, int vocab_size, std::vector<TokenId> eos_token_ids);
  ~StructuredOutput();

  // A matcher for `sampling.structured_output` (REQUIRES: not empty). Its end tokens are
  // the model's eos ids (unless ignore_eos) and the stop_token_ids. InvalidArgument for a spec
  // the grammar refuses; FailedPrecondition when the model directory has no usable tokenizer.
  StatusOr<std::unique_ptr<grammar::GrammarMatcher>> NewMatcher(const runtime::SamplingParams& sampling);

  int mask_words() const { return grammar::MaskWords(vocab_size_); }

 private:
  // The cache, once the vocabulary is there; the load's error otherwise.
  StatusOr<grammar::GrammarCache*> Cache();

  int vocab_size_ = 0;
  std::vector<TokenId> eos_token_ids_;
  std::future<StatusOr<std::shared_ptr<const grammar::TokenVocabulary>>> loading_;
  Status load_status_;
  std::unique_ptr<grammar::GrammarCache> cache_;
};

}  // namespace tandem::engine
