#include "common/engine/structured_output.h"

#include <filesystem>

#include "common/base/logging.h"
#include "common/tokenizer/tokenizer.h"

namespace tandem::engine {
namespace {

StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> LoadVocabulary(const std::string& model_dir,
                                                                         int vocab_size) {
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tokenizer = tokenizer::Tokenizer::FromFile(path);
  if (!tokenizer.ok()) {
    return FailedPreconditionError("structured output needs the model's tokenizer: " + tokenizer.status().message());
  }
  return grammar::TokenVocabulary::FromTokenizer(**tokenizer, vocab_size);
}

}  // namespace

StructuredOutput::StructuredOutput(const std::string& model_dir, int vocab_size, std::vector<TokenId> eos_token_ids)
    : vocab_size_(vocab_size), eos_token_ids_(std::move(eos_token_ids)) {
  loading_ = std::async(std::launch::async, [model_dir, vocab_size] { return LoadVocabulary(model_dir, vocab_size); });
}

// Waits for the load so that its thread never outlives the engine.
StructuredOutput::~StructuredOutput() {
  if (loading_.valid()) loading_.wait();
}

StatusOr<grammar::GrammarCache*> StructuredOutput::Cache() {
  if (loading_.valid()) {
    StatusOr<std::shared_ptr<const grammar::TokenVocabulary>> vocab = loading_.get();
    if (vocab.ok()) {
      cache_ = std::make_unique<grammar::GrammarCache>(*vocab);
    } else {
      load_status_ = vocab.status();
      TANDEM_LOG_WARN("engine: structured output unavailable: {}", load_status_.ToString());
    }
  }
  if (cache_ == nullptr) return load_status_;
  return cache_.get();
}

StatusOr<std::unique_ptr<grammar::GrammarMatcher>> StructuredOutput::NewMatcher(
    const runtime::SamplingParams& sampling) {
  TANDEM_ASSIGN_OR_RETURN(grammar::GrammarCache * cache, Cache());
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<grammar::TokenGrammar> compiled, cache->Get(sampling.structured_output));
  std::vector<TokenId> end_tokens = sampling.stop_token_ids;
  if (!sampling.ignore_eos) end_tokens.insert(end_tokens.end(), eos_token_ids_.begin(), eos_token_ids_.end());
  return std::make_unique<grammar::GrammarMatcher>(std::move(compiled), std::move(end_tokens));
}

}  // namespace tandem::engine
