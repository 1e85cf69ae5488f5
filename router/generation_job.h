// GenerationJob: the generation behind one OpenAI request, independent of HTTP.
//
// It submits one engine request per choice (every prompt times `n`), turns
// each choice's token batches into text (incremental detokenizer, UTF-8
// holdback, stop strings across token boundaries), counts usage, and reports
// text deltas, per-choice ends and one final outcome. As in vLLM, the token that
// ends a sequence (a stop token id, or EOS unless ignore_eos) adds no text
// unless include_stop_str_in_output, and no stop string ends a choice within
// its first min_tokens tokens. With logprobs asked for (base.logprobs >= 0),
// every sampled token of a choice up to the one that ends it gets an entry
// (ChoiceOutput::logprobs); a stream delivers each entry with the text event
// that follows its token, the rest with the choice's end.
//
// Thread rule: every method and every event runs on the job's executor
// (`post` must serialize, e.g. an Asio strand); engine callbacks are posted
// onto it, so the job needs no lock. The engine must stop calling back
// before the executor is destroyed.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "router/engine_client.h"
#include "router/openai_response.h"
#include "router/stop_matcher.h"
#include "router/text_codec.h"
#include "router/utf8_stream.h"

namespace tandem::router {

struct JobSpec {
  std::vector<std::vector<TokenId>> prompts;  // tokenized prompts, each non-empty
  int32_t n = 1;                              // choices per prompt
  GenerateRequest base;                       // everything but request_id and prompt
  std::vector<std::string> stop;              // stop strings (non-empty)
  bool include_stop_str_in_output = false;    // keep the matched stop string / stop token's text
  bool skip_special_tokens = true;            // special tokens add no text
  std::vector<TokenId> eos_token_ids;         // the model's EOS ids (they end a sequence unless ignore_eos)
  // echo: per prompt, its text, output before each of its choices' completions (with
  // base.prompt_logprobs >= 0, with the prompt tokens' logprob entries first). Empty: no echo.
  std::vector<std::string> echo_texts;
  bool echo_only = false;  // max_tokens 0: the echo is the whole output; the sampled token is dropped
};

struct JobEvents {
  // `count` sampled tokens of choice `index` arrived (before any text they make).
  std::function<void(int32_t index, int32_t count)> on_tokens;
  // A non-empty, valid UTF-8 piece of choice `index` (index = prompt * n + i), and
  // the logprob entries of the tokens not delivered before it.
  std::function<void(int32_t index, const std::string& text, std::vector<ChoiceLogprob> logprobs)> on_text;
  // The choice ended; the logprob entries not delivered with its text.
  std::function<void(int32_t index, FinishReason reason, std::vector<ChoiceLogprob> logprobs)> on_choice_done;
  // Exactly once unless Cancel() came first: OK when every choice finished,
  // else the first error (the other choices are cancelled).
  std::function<void(const Status& status)> on_done;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  using Post = std::function<void(std::function<void()>)>;

  static std::shared_ptr<GenerationJob> Create(EngineClient* engine, const TextCodec* codec, Post post, JobSpec spec,
                                               JobEvents events);

  // Submits every choice to the engine.
  void Start();
  // Stops everything (client gone, deadline); no more events are delivered.
  void Cancel();

  // The node stage times of choice `index`, once its first tokens came (nullopt before,
  // or from an engine that reports none).
  const std::optional<NodeStageTimes>& stage_times(int32_t index) const { return choices_[index].stage_times; }

  // Valid once on_done(OK) ran: text and finish reason per choice, and usage.
  const std::vector<ChoiceOutput>& outputs() const { return outputs_; }
  const Usage& usage() const { return usage_; }
  int32_t num_choices() const { return static_cast<int32_t>(choices_.size()); }

 private:
  struct Choice {
    RequestId request_id = 0;
    int32_t prompt_index = 0;
    std::unique_ptr<TextDecoder> decoder;
    Utf8Assembler utf8;
    StopMatcher stop;
    bool done = false;
    int32_t cached = 0;      // prompt tokens served from the prefix cache (on_cached / on_finish)
    int32_t num_tokens = 0;  // tokens generated so far
    std::vector<ChoiceLogprob> undelivered;  // logprob entries no text event carried yet
    int64_t text_offset = 0;                 // characters of the tokens' texts so far (text_offset)
    std::optional<NodeStageTimes> stage_times;  // the first the engine reported
    std::vector<TokenLogprobs> prompt_logprobs;  // echo: from the engine, before the first tokens
    bool echoed = false;                         // the echo went out
  };

  GenerationJob(EngineClient* engine, const TextCodec* codec, Post post, JobSpec spec, JobEvents events);
  StreamCallbacks MakeCallbacks(int32_t index);
  void OnTokens(int32_t index, const std::vector<TokenId>& token_ids, const std::vector<TokenLogprobs>& logprobs);
  // The logprob entry of token `id`, appended to the choice's output and undelivered list
  // (`has_logprob` false: an echoed prompt's first token, shown with a null logprob).
  void AddLogprob(int32_t index, TokenId id, const TokenLogprobs& logprobs, bool has_logprob = true);
  // Outputs the echo of choice `index`'s prompt (and its logprob entries); false after an error.
  bool Echo(int32_t index);
  void OnFinish(int32_t index, const GenerateResult& result);
  void OnCached(int32_t index, int32_t num_cached_prompt_tokens);
  void OnError(int32_t index, const Status& status);
  // Runs text through the stop matcher and delivers what is safe; true on a stop match.
  bool Deliver(int32_t index, const std::string& text);
  // True for a token that ends its sequence at the engine (a stop id, or EOS unless ignore_eos).
  bool EndsSequence(TokenId id) const;
  void FinishChoice(int32_t index, FinishReason reason);

  EngineClient* const engine_;
  const TextCodec* const codec_;
  const Post post_;
  JobSpec spec_;
  JobEvents events_;
  std::vector<Choice> choices_;
  std::vector<ChoiceOutput> outputs_;
  Usage usage_;
  int32_t num_done_ = 0;
  bool finished_ = false;  // on_done ran or Cancel() was called
};

}  // namespace tandem::router
