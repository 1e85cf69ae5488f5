// tandem-generate: single-process generation through the engine (CPU backend).
// Renders the chat template (with --chat), tokenizes, serves every prompt
// concurrently through continuous batching (--backend cpu|cuda), and streams the text of the first
// prompt as it is generated; the others are printed when they finish.
//
//   tandem-generate --model-dir build/models/tiny --prompt "Hello" --prompt "Tell me" --max-tokens 32
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <memory>

#include "common/base/logging.h"
#include "common/engine/engine.h"
#include "common/engine/backend_factory.h"
#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/incremental_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "common/tokenizer/tokenizer_config.h"

namespace tandem {
namespace {

struct Options {
  std::vector<std::string> prompts;
  bool chat = false;
  int max_tokens = 48;
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t seed = -1;
  bool ignore_eos = false;
  std::string log_level = "warn";
};

StatusOr<std::vector<TokenId>> PromptIds(const tokenizer::Tokenizer& tok, const std::string& dir,
                                         const std::string& text, bool chat) {
  if (!chat) return tok.Encode(text, /*add_special_tokens=*/true);
  TANDEM_ASSIGN_OR_RETURN(tokenizer::ChatTemplate tmpl, tokenizer::ChatTemplate::FromModelDir(dir));
  TANDEM_ASSIGN_OR_RETURN(tokenizer::TokenizerConfig cfg, tokenizer::TokenizerConfig::FromModelDir(dir));
  tokenizer::ChatRenderOptions options;
  options.bos_token = cfg.bos_token;
  options.eos_token = cfg.eos_token;
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", text}}});
  TANDEM_ASSIGN_OR_RETURN(std::string rendered, tmpl.Render(messages, options));
  return tok.Encode(rendered, /*add_special_tokens=*/false);
}

Status Run(engine::EngineConfig config, const Options& o) {
  TANDEM_RETURN_IF_ERROR(InitLogging(o.log_level));
  TANDEM_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::FromFile(config.model_dir + "/tokenizer.json"));
  TANDEM_ASSIGN_OR_RETURN(auto backend, engine::MakeBackend(config.backend, config.device));
  TANDEM_ASSIGN_OR_RETURN(auto engine, engine::Engine::Create(config, std::move(backend)));
  std::map<RequestId, tokenizer::IncrementalDetokenizer> detok;
  std::map<RequestId, std::string> text;
  for (size_t i = 0; i < o.prompts.size(); ++i) {
    engine::EngineRequest r;
    r.id = i + 1;
    TANDEM_ASSIGN_OR_RETURN(r.prompt_tokens, PromptIds(*tok, config.model_dir, o.prompts[i], o.chat));
    r.sampling.temperature = static_cast<float>(o.temperature);
    r.sampling.top_p = static_cast<float>(o.top_p);
    r.sampling.max_tokens = o.max_tokens;
    r.sampling.ignore_eos = o.ignore_eos;
    if (o.seed >= 0) r.sampling.seed = static_cast<uint64_t>(o.seed) + i;
    detok.emplace(r.id, tokenizer::IncrementalDetokenizer(*tok, /*skip_special_tokens=*/true));
    engine->Submit(std::move(r));
  }
  if (o.prompts.size() == 1) std::printf("%s", o.prompts[0].c_str());
  size_t done = 0;
  Status failure;
  while (done < o.prompts.size()) {
    std::vector<engine::EngineOutput> outputs;
    engine->StepOnce(&outputs);
    for (auto& out : outputs) {
      auto& d = detok.at(out.id);
      std::string piece;
      for (TokenId t : out.tokens) piece += d.Add(t);
      if (out.finished) piece += d.Finish();
      text[out.id] += piece;
      if (o.prompts.size() == 1) {
        std::printf("%s", piece.c_str());
        std::fflush(stdout);
      }
      if (!out.finished) continue;
      ++done;
      if (!out.status.ok()) failure = out.status;
      if (o.prompts.size() > 1) {
        std::printf("[%llu] %s%s\n", static_cast<unsigned long long>(out.id), o.prompts[out.id - 1].c_str(),
                    text[out.id].c_str());
      }
      std::fprintf(stderr, "\n[%llu] finish=%s prompt_tokens=%d completion_tokens=%d\n",
                   static_cast<unsigned long long>(out.id),
                   std::string(scheduler::FinishReasonName(out.finish_reason)).c_str(), out.num_prompt_tokens,
                   out.num_generated_tokens);
    }
  }
  if (o.prompts.size() == 1) std::printf("\n");
  return failure;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::engine::EngineConfig config;
  tandem::Options o;
  tandem::config::ConfigBinder binder;
  config.Bind(binder);
  CLI::App app("tandem-generate: single-process generation (CPU or CUDA backend)");
  binder.AddFlags(app);
  app.add_option("--prompt", o.prompts, "prompt text (repeat for several concurrent prompts)")->required();
  app.add_flag("--chat", o.chat, "apply the model's chat template to each prompt");
  app.add_option("--max-tokens", o.max_tokens, "tokens to generate per prompt");
  app.add_option("--temperature", o.temperature, "0 = greedy");
  app.add_option("--top-p", o.top_p, "nucleus sampling");
  app.add_option("--seed", o.seed, "sampling seed (-1: random)");
  app.add_flag("--ignore-eos", o.ignore_eos, "do not stop at the end-of-sequence token");
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error|off");
  CLI11_PARSE(app, argc, argv);
  tandem::Status status = binder.Apply();
  if (status.ok()) status = tandem::Run(config, o);
  if (!status.ok()) {
    std::fprintf(stderr, "tandem-generate: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
