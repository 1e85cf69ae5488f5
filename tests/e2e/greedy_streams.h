// GreedyStreams: distinct prompts for the tiny model, each with its single-process
// greedy text (the oracle), and a StreamLoad that sends them round robin as
// greedy streams of max_tokens (ignore_eos). For e2e tests of the cluster under load.
// Thread rule: immutable once made; the load it makes keeps a copy.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "tests/e2e/reference_engine.h"
#include "tests/e2e/stream_load.h"

namespace tandem::e2e {

struct GreedyStreams {
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::string> texts;  // texts[p]: the greedy text of prompts[p]
  int max_tokens = 0;

  // Prompt p (of `count`) has 8 + p tokens, token j = 40 + (p * a + j * b) % 200, on the
  // tiny model in `model_dir` (MakeTinyModel). nullopt when its tokenizer cannot load.
  static std::optional<GreedyStreams> Make(const std::string& model_dir, int count, int max_tokens, int a, int b) {
    auto tokenizer = tokenizer::Tokenizer::FromFile(model_dir + "/tokenizer.json");
    if (!tokenizer.ok()) return std::nullopt;
    GreedyStreams s;
    s.max_tokens = max_tokens;
    for (int p = 0; p < count; ++p) {
      std::vector<TokenId> prompt(8 + p);
      for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = 40 + (p * a + static_cast<int>(j) * b) % 200;
      auto text = (*tokenizer)->Decode(ReferenceTokens(model_dir, prompt, max_tokens), /*skip_special_tokens=*/true);
      if (!text.ok()) return std::nullopt;
      s.prompts.push_back(std::move(prompt));
      s.texts.push_back(*text);
    }
    return s;
  }

  // `concurrency` clients against the router on `port` (StreamLoad's retry_refused).
  std::unique_ptr<StreamLoad> Load(uint16_t port, int concurrency, bool retry_refused = false) const {
    const GreedyStreams s = *this;
    return std::make_unique<StreamLoad>(
        port, concurrency,
        [s](int i) {
          const size_t p = static_cast<size_t>(i) % s.prompts.size();
          return nlohmann::json{{"model", "tiny"},  {"prompt", s.prompts[p]}, {"max_tokens", s.max_tokens},
                                {"temperature", 0}, {"ignore_eos", true},     {"stream", true}};
        },
        [s](int i) { return s.texts[static_cast<size_t>(i) % s.texts.size()]; }, retry_refused);
  }
};

}  // namespace tandem::e2e
