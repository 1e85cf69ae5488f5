// The oracle of the e2e tests: greedy tokens from one in-process Engine (CPU
// backend) on the same model directory the cluster serves.
// Thread rule: any one thread; each call builds its own engine.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/base/check.h"
#include "common/engine/backend_factory.h"
#include "common/engine/engine.h"

namespace tandem::e2e {

// The tokens `sampling` generates after `prompt` (every sampled token, a final
// stop token included), and the engine's finish reason ("stop" or "length");
// with sampling.logprobs >= 0, each token's logprobs in *logprobs; with sampling.prompt_logprobs
// >= 0, the prompt's in *prompt_logprobs.
inline std::vector<TokenId> ReferenceRun(const std::string& model_dir, const std::vector<TokenId>& prompt,
                                         const runtime::SamplingParams& sampling,
                                         std::string* finish_reason = nullptr,
                                         std::vector<runtime::SampledLogprobs>* logprobs = nullptr,
                                         std::vector<runtime::SampledLogprobs>* prompt_logprobs = nullptr) {
  engine::EngineConfig config;
  config.model_dir = model_dir;
  config.model_name = "tiny";
  config.num_device_blocks = 256;
  auto engine = engine::Engine::Create(config, std::move(*engine::MakeBackend("cpu", 0)));
  TANDEM_CHECK(engine.ok()) << engine.status().ToString();
  engine::EngineRequest r;
  r.id = 1;
  r.prompt_tokens = prompt;
  r.sampling = sampling;
  (*engine)->Submit(r);
  std::vector<TokenId> out;
  for (bool done = false; !done;) {
    std::vector<engine::EngineOutput> outputs;
    (*engine)->StepOnce(&outputs);
    for (auto& o : outputs) {
      out.insert(out.end(), o.tokens.begin(), o.tokens.end());
      if (logprobs != nullptr) logprobs->insert(logprobs->end(), o.logprobs.begin(), o.logprobs.end());
      if (prompt_logprobs != nullptr && !o.prompt_logprobs.empty()) *prompt_logprobs = o.prompt_logprobs;
      if (o.finished && finish_reason != nullptr) *finish_reason = scheduler::FinishReasonName(o.finish_reason);
      done = done || o.finished;
    }
  }
  return out;
}

// Greedy continuation of `prompt`, `max_tokens` long (EOS ignored).
inline std::vector<TokenId> ReferenceTokens(const std::string& model_dir, const std::vector<TokenId>& prompt,
                                            int max_tokens) {
  runtime::SamplingParams sampling;
  sampling.temperature = 0;
  sampling.max_tokens = max_tokens;
  sampling.ignore_eos = true;
  return ReferenceRun(model_dir, prompt, sampling);
}

// prompt_tokens_details.cached_tokens of a prompt of `prompt_len` tokens sent a
// second time, its first run's blocks still cached on decode (block size 16):
// decode reuses every full block it holds but must compute at least one prompt
// token, so a prompt that is all full blocks reuses one block less (Reserve finds
// nothing to transfer and the router takes the local path, which leaves the last
// token to compute). Both cases are 16 * floor((prompt_len - 1) / 16).
inline int RepeatedPromptCachedTokens(int prompt_len, int block_size = 16) {
  return prompt_len < 1 ? 0 : (prompt_len - 1) / block_size * block_size;
}

}  // namespace tandem::e2e
