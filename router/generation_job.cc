#include "router/generation_job.h"

#include <algorithm>
#include <atomic>
#include <utility>

namespace tandem::router {
namespace {

RequestId NextRequestId() {
  static std::atomic<RequestId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::shared_ptr<GenerationJob> GenerationJob::Create(EngineClient* engine, const TextCodec* codec, Post post,
                                                     JobSpec spec, JobEvents events) {
  return std::shared_ptr<GenerationJob>(
      new GenerationJob(engine, codec, std::move(post), std::move(spec), std::move(events)));
}

GenerationJob::GenerationJob(EngineClient* engine, const TextCodec* codec, Post post, JobSpec spec, JobEvents events)
    : engine_(engine), codec_(codec), post_(std::move(post)), spec_(std::move(spec)), events_(std::move(events)) {
  for (size_t p = 0; p < spec_.prompts.size(); ++p) {
    usage_.prompt_tokens += static_cast<int64_t>(spec_.prompts[p].size());
    for (int32_t i = 0; i < spec_.n; ++i) {
      choices_.push_back(Choice{NextRequestId(), static_cast<int32_t>(p), codec_->NewDecoder(spec_.skip_special_tokens),
                                Utf8Assembler(), StopMatcher(spec_.stop, spec_.include_stop_str_in_output), false});
    }
  }
  outputs_.resize(choices_.size());
}

StreamCallbacks GenerationJob::MakeCallbacks(int32_t index) {
  std::weak_ptr<GenerationJob> weak = weak_from_this();
  Post post = post_;
  StreamCallbacks callbacks;
  callbacks.on_tokens = [weak, post, index](std::vector<TokenId> ids, std::vector<TokenLogprobs> logprobs) {
    post([weak, index, ids = std::move(ids), logprobs = std::move(logprobs)] {
      if (auto self = weak.lock()) self->OnTokens(index, ids, logprobs);
    });
  };
  callbacks.on_finish = [weak, post, index](const GenerateResult& result) {
    post([weak, index, result] {
      if (auto self = weak.lock()) self->OnFinish(index, result);
    });
  };
  callbacks.on_cached = [weak, post, index](int32_t cached) {
    post([weak, index, cached] {
      if (auto self = weak.lock()) self->OnCached(index, cached);
    });
  };
  callbacks.on_prompt_logprobs = [weak, post, index](std::vector<TokenLogprobs> logprobs) {
    post([weak, index, logprobs = std::move(logprobs)]() mutable {
      if (auto self = weak.lock()) self->choices_[index].prompt_logprobs = std::move(logprobs);
    });
  };
  callbacks.on_stage_times = [weak, post, index](const NodeStageTimes& times) {
    post([weak, index, times] {
      auto self = weak.lock();
      if (self && !self->choices_[index].stage_times) self->choices_[index].stage_times = times;
    });
  };
  callbacks.on_error = [weak, post, index](const Status& status) {
    post([weak, index, status] {
      if (auto self = weak.lock()) self->OnError(index, status);
    });
  };
  return callbacks;
}

void GenerationJob::Start() {
  for (size_t c = 0; c < choices_.size(); ++c) {
    if (finished_) return;  // a synchronous failure may end the job early
    const Choice& choice = choices_[c];
    GenerateRequest request = spec_.base;
    request.request_id = choice.request_id;
    request.prompt_token_ids = spec_.prompts[choice.prompt_index];
    // Independent samples for n > 1 when the client fixed a seed.
    const int32_t i = static_cast<int32_t>(c) % spec_.n;
    if (request.sampling.seed) *request.sampling.seed += static_cast<uint64_t>(i);
    engine_->Submit(std::move(request), MakeCallbacks(static_cast<int32_t>(c)));
  }
}

void GenerationJob::Cancel() {
  if (finished_) return;
  finished_ = true;
  for (Choice& choice : choices_) {
    if (!choice.done) engine_->Cancel(choice.request_id);
  }
  events_ = JobEvents();  // drops what the events captured (breaks ownership cycles)
}

bool GenerationJob::EndsSequence(TokenId id) const {
  auto in = [id](const std::vector<TokenId>& ids) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  return in(spec_.base.stop_token_ids) || (!spec_.base.ignore_eos && in(spec_.eos_token_ids));
}

bool GenerationJob::Deliver(int32_t index, const std::string& text) {
  Choice& choice = choices_[index];
  // Before min_tokens tokens no stop string may end the choice (vLLM checks from then on).
  StopMatcher::Output out = choice.stop.Add(text, choice.num_tokens > spec_.base.min_tokens);
  if (!out.text.empty()) {
    outputs_[index].text += out.text;
    if (events_.on_text) events_.on_text(index, out.text, std::exchange(choice.undelivered, {}));
  }
  return out.stopped;
}

void GenerationJob::AddLogprob(int32_t index, TokenId id, const TokenLogprobs& logprobs, bool has_logprob) {
  Choice& choice = choices_[index];
  ChoiceLogprob entry;
  entry.has_logprob = has_logprob;
  entry.token = LogprobToken{codec_->TokenBytes(id), logprobs.logprob};
  for (const TopLogprob& t : logprobs.top) entry.top.push_back(LogprobToken{codec_->TokenBytes(t.token_id), t.logprob});
  entry.text_offset = choice.text_offset;
  // Characters, as the legacy API counts: every byte that does not continue a UTF-8 sequence.
  for (unsigned char c : entry.token.bytes) choice.text_offset += (c & 0xC0) != 0x80;
  // A stream hands each entry to its text events; only a whole response keeps them all.
  if (events_.on_text) {
    choice.undelivered.push_back(std::move(entry));
  } else {
    outputs_[index].logprobs.push_back(std::move(entry));
  }
}

void GenerationJob::OnTokens(int32_t index, const std::vector<TokenId>& token_ids,
                             const std::vector<TokenLogprobs>& logprobs) {
  Choice& choice = choices_[index];
  if (finished_ || choice.done) return;
  if (!spec_.echo_texts.empty() && !choice.echoed && !Echo(index)) return;
  if (spec_.echo_only) return;  // max_tokens 0: the one sampled token is not output
  if (events_.on_tokens) events_.on_tokens(index, static_cast<int32_t>(token_ids.size()));
  const bool with_logprobs = spec_.base.logprobs >= 0;
  if (with_logprobs && logprobs.size() != token_ids.size()) {
    // A node of an older build ignores the request's logprobs: fail rather than answer without them.
    return OnError(index, InternalError("tokens arrived without their logprobs"));
  }
  for (size_t t = 0; t < token_ids.size(); ++t) {
    const TokenId id = token_ids[t];
    if (with_logprobs) AddLogprob(index, id, logprobs[t]);
    ++usage_.completion_tokens;
    ++choice.num_tokens;
    // The engine ends the sequence with this token; its text is not output unless asked for.
    if (!spec_.include_stop_str_in_output && EndsSequence(id)) continue;
    const std::string piece = choice.utf8.Add(choice.decoder->Add(id));
    if (Deliver(index, piece)) {
      engine_->Cancel(choice.request_id);
      FinishChoice(index, FinishReason::kStop);
      return;
    }
  }
}

bool GenerationJob::Echo(int32_t index) {
  Choice& choice = choices_[index];
  choice.echoed = true;
  if (spec_.base.prompt_logprobs >= 0) {
    const std::vector<TokenId>& prompt = spec_.prompts[choice.prompt_index];
    if (choice.prompt_logprobs.size() + 1 != prompt.size()) {
      // A node of an older build ignores prompt logprobs: fail rather than answer without them.
      OnError(index, InternalError("the prompt's logprobs did not arrive with the first tokens"));
      return false;
    }
    // Nothing comes before the first token: its logprob is null.
    AddLogprob(index, prompt[0], TokenLogprobs{}, /*has_logprob=*/false);
    for (size_t t = 1; t < prompt.size(); ++t) AddLogprob(index, prompt[t], choice.prompt_logprobs[t - 1]);
    choice.prompt_logprobs.clear();
  }
  // As vLLM: the echo is not searched for stop strings.
  const std::string& text = spec_.echo_texts[choice.prompt_index];
  outputs_[index].text += text;
  if (events_.on_text) events_.on_text(index, text, std::exchange(choice.undelivered, {}));
  return true;
}

void GenerationJob::OnCached(int32_t index, int32_t num_cached_prompt_tokens) {
  Choice& choice = choices_[index];
  if (finished_ || choice.done) return;
  choice.cached = num_cached_prompt_tokens;
}

void GenerationJob::OnFinish(int32_t index, const GenerateResult& result) {
  Choice& choice = choices_[index];
  if (finished_ || choice.done) return;
  choice.cached = result.num_cached_prompt_tokens;
  if (spec_.echo_only) return FinishChoice(index, FinishReason::kLength);
  std::string tail = choice.utf8.Add(choice.decoder->Finish());
  tail += choice.utf8.Finish();
  if (Deliver(index, tail)) {
    FinishChoice(index, FinishReason::kStop);
    return;
  }
  const std::string held = choice.stop.Finish();
  if (!held.empty()) {
    outputs_[index].text += held;
    if (events_.on_text) events_.on_text(index, held, std::exchange(choice.undelivered, {}));
  }
  FinishChoice(index, result.finish_reason);
}

void GenerationJob::OnError(int32_t index, const Status& status) {
  // A choice the job ended itself (a stop string cancels it) may still report the cancel.
  if (finished_ || choices_[index].done) return;
  JobEvents events = std::move(events_);
  Cancel();
  if (events.on_done) events.on_done(status.ok() ? InternalError("engine client error") : status);
}

void GenerationJob::FinishChoice(int32_t index, FinishReason reason) {
  choices_[index].done = true;
  // The prompt is counted once per prompt, so its cache hits are too (first choice).
  if (index % spec_.n == 0) usage_.cached_tokens += choices_[index].cached;
  outputs_[index].finish_reason = reason;
  if (events_.on_choice_done) events_.on_choice_done(index, reason, std::exchange(choices_[index].undelivered, {}));
  if (++num_done_ < static_cast<int32_t>(choices_.size()) || finished_) return;
  finished_ = true;
  JobEvents events = std::move(events_);
  events_ = JobEvents();
  if (events.on_done) events.on_done(Status::Ok());
}

}  // namespace tandem::router
