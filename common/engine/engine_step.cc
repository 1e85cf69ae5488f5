// Engine::StepOnce: one continuous-batching step on the engine thread.
#include <algorithm>
#include <string>

#include "common/base/logging.h"
#include "common/engine/engine.h"

namespace tandem::engine {

void Engine::DrainEvents(std::vector<EngineOutput>* outputs) {
  std::deque<std::function<void(std::vector<EngineOutput>*)>> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events.swap(events_);
  }
  for (auto& event : events) event(outputs);
}

void Engine::EmitFinished(const scheduler::SchedulerOutput& step, std::vector<EngineOutput>* outputs) {
  for (const scheduler::FinishedSequence& f : step.finished) {
    if (reported_.erase(f.id) > 0) continue;
    EngineOutput out;
    out.id = f.id;
    out.finished = true;
    out.finish_reason = f.reason;
    out.status = f.status;
    out.num_prompt_tokens = f.num_prompt_tokens;
    out.num_generated_tokens = f.num_generated_tokens;
    out.num_cached_tokens = f.num_cached_prompt_tokens;
    out.times = TimesOf(f.id);
    outputs->push_back(std::move(out));
    requests_.erase(f.id);
  }
}

void Engine::MarkScheduled(const scheduler::SchedulerOutput& step) {
  if (step.scheduled.empty()) return;
  const Nanos now = clock_.NowNanos();
  for (const scheduler::ScheduledSequence& s : step.scheduled) {
    auto state = requests_.find(s.id);
    if (state != requests_.end() && state->second.admitted_at == 0) state->second.admitted_at = now;
  }
}

Status Engine::RunStep(const scheduler::SchedulerOutput& step, std::vector<EngineOutput>* outputs) {
  TANDEM_RETURN_IF_ERROR(storage_->ExecuteCopies(step.copies));
  if (step.scheduled.empty()) return Status::Ok();
  std::vector<runtime::SeqChunk> chunks;
  chunks.reserve(step.scheduled.size());
  for (const scheduler::ScheduledSequence& s : step.scheduled) {
    chunks.push_back(runtime::SeqChunk{s.new_tokens, s.start_position, s.block_table,
                                       s.needs_logits || s.all_logits, s.all_logits});
  }
  const bool observed = observer_.on_begin && observer_.on_begin(step);
  const bool decode_only =
      !observed && std::all_of(step.scheduled.begin(), step.scheduled.end(),
                               [](const scheduler::ScheduledSequence& s) { return !s.is_prefill; });
  std::function<void(int)> after_layer;
  if (observed && observer_.on_layer) after_layer = observer_.on_layer;
  Status begun = backend_->BeginStep(decode_only);
  StatusOr<runtime::Tensor> device_logits =
      begun.ok() ? model_->Forward(chunks, *device_kv_, after_layer) : StatusOr<runtime::Tensor>(begun);
  if (!device_logits.ok()) {
    if (begun.ok()) backend_->AbortStep();
  } else if (Status ended = backend_->EndStep(); !ended.ok()) {
    device_logits = ended;
  }
  if (observed && observer_.on_end) observer_.on_end(step, device_logits.status());
  if (!device_logits.ok()) return device_logits.status();
  return SampleStep(step, *device_logits, outputs);
}

Status Engine::SampleStep(const scheduler::SchedulerOutput& step, runtime::Tensor logits,
                          std::vector<EngineOutput>* outputs) {
  // Every row's request first (the spans point into the sequences, which no
  // AppendToken touches until the backend has sampled them all).
  std::vector<RequestId> ids;
  std::vector<RequestState*> states;
  std::vector<runtime::SampleRequest> requests;
  std::vector<int> first_token_cached;  // per row: the prompt's cache hits if this is its first token, else 0
  size_t num_masked = 0;
  for (const scheduler::ScheduledSequence& s : step.scheduled) {
    if (!s.needs_logits) continue;
    auto state = requests_.find(s.id);
    if (state != requests_.end() && state->second.matcher != nullptr) ++num_masked;
  }
  const size_t mask_words = structured_output_->mask_words();
  masks_.resize(num_masked * mask_words);  // sized once: the rows' spans point into it
  std::vector<Status> grammar_status;     // per row: a token the grammar refused fails the row
  size_t next_mask = 0;
  // Logits rows: one per sequence that samples, and every new token's for an all_logits
  // chunk (prompt logprobs), whose last row is its sample's when it samples.
  std::vector<int64_t> sample_rows;
  int64_t row = 0;
  for (const scheduler::ScheduledSequence& s : step.scheduled) {
    if (s.all_logits) {
      TANDEM_RETURN_IF_ERROR(RecordPromptLogprobs(s, logits.Rows(row, s.num_new_tokens)));
      row += s.num_new_tokens;
      if (s.needs_logits) sample_rows.push_back(row - 1);
    } else if (s.needs_logits) {
      sample_rows.push_back(row++);
    }
    if (!s.needs_logits) continue;
    const scheduler::Sequence* seq = scheduler_->Find(s.id);
    auto state = requests_.find(s.id);
    TANDEM_CHECK(seq != nullptr && state != requests_.end()) << "scheduled unknown request " << s.id;
    runtime::SampleRequest sample;
    sample.params = &state->second.sampling;
    // The prompt's tail that is this request's earlier output (a moved request) samples as output.
    const size_t prompt_end = seq->num_prompt_tokens() - state->second.sampling.num_output_tokens_in_prompt;
    sample.prompt_tokens = std::span<const TokenId>(seq->tokens).first(prompt_end);
    sample.output_tokens = std::span<const TokenId>(seq->tokens).subspan(prompt_end);
    sample.eos_token_ids = eos_token_ids_;
    sample.seed = state->second.seed;
    grammar_status.emplace_back();
    if (state->second.matcher != nullptr) {
      std::span<uint32_t> mask(masks_.data() + next_mask++ * mask_words, mask_words);
      grammar_status.back() = FillTokenMask(state->second, sample.output_tokens, mask);
      sample.allowed_tokens = mask;
    }
    ids.push_back(s.id);
    states.push_back(&state->second);
    requests.push_back(sample);
    first_token_cached.push_back(seq->num_generated_tokens() == 0 ? seq->num_cached_prompt_tokens : 0);
  }
  std::vector<runtime::SampledToken> sampled(requests.size());
  TANDEM_RETURN_IF_ERROR(SampleRows(logits, sample_rows, requests, sampled));
  const Nanos now = clock_.NowNanos();
  for (size_t i = 0; i < ids.size(); ++i) {
    const RequestId id = ids[i];
    if (!grammar_status[i].ok()) sampled[i].status = grammar_status[i];
    if (!sampled[i].status.ok()) {
      TANDEM_LOG_WARN("request {}: sampling failed: {}", id, sampled[i].status.ToString());
      scheduler_->Cancel(id).IgnoreError();
      reported_.insert(id);
      outputs->push_back(EngineOutput{id, {}, true, scheduler::FinishReason::kAborted, sampled[i].status});
      outputs->back().times = TimesOf(id);
      requests_.erase(id);
      continue;
    }
    TANDEM_RETURN_IF_ERROR(scheduler_->AppendToken(id, sampled[i].token).status());
    const bool first_token = states[i]->first_token_at == 0;
    if (first_token) states[i]->first_token_at = now;
    states[i]->last_token_at = now;
    EngineOutput out;
    out.id = id;
    out.tokens.push_back(sampled[i].token);
    if (states[i]->sampling.logprobs >= 0) out.logprobs.push_back(std::move(sampled[i].logprobs));
    out.num_cached_tokens = first_token_cached[i];
    if (first_token) {
      out.times = TimesOf(id);
      out.prompt_logprobs = std::move(states[i]->prompt_logprobs);
    }
    outputs->push_back(std::move(out));
  }
  return Status::Ok();
}

Status Engine::RecordPromptLogprobs(const scheduler::ScheduledSequence& s, runtime::Tensor rows) {
  const scheduler::Sequence* seq = scheduler_->Find(s.id);
  auto state = requests_.find(s.id);
  TANDEM_CHECK(seq != nullptr && state != requests_.end()) << "scheduled unknown request " << s.id;
  std::vector<runtime::SampledLogprobs>& recorded = state->second.prompt_logprobs;
  // Row j (position start + j) gives the logprob of the prompt token at start + j + 1.
  const int64_t start = s.start_position;
  const int64_t count = std::min<int64_t>(s.num_new_tokens, seq->num_prompt_tokens() - 1 - start);
  if (count <= 0 || static_cast<int64_t>(recorded.size()) != start) return Status::Ok();  // nothing new
  const std::span<const TokenId> next = std::span<const TokenId>(seq->tokens).subspan(start + 1, count);
  std::vector<runtime::SampledLogprobs> out(count);
  TANDEM_RETURN_IF_ERROR(
      backend_->PromptLogprobs(rows.Rows(0, count), next, state->second.sampling.prompt_logprobs, out));
  recorded.insert(recorded.end(), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
  return Status::Ok();
}

Status Engine::SampleRows(runtime::Tensor logits, std::span<const int64_t> rows,
                          std::span<const runtime::SampleRequest> requests, std::span<runtime::SampledToken> out) {
  for (size_t begin = 0; begin < rows.size();) {
    size_t end = begin + 1;
    while (end < rows.size() && rows[end] == rows[end - 1] + 1) ++end;
    const int64_t count = static_cast<int64_t>(end - begin);
    TANDEM_RETURN_IF_ERROR(backend_->SampleTokens(logits.Rows(rows[begin], count), requests.subspan(begin, count),
                                                  out.subspan(begin, count)));
    begin = end;
  }
  return Status::Ok();
}

Status Engine::FillTokenMask(RequestState& state, std::span<const TokenId> output_tokens, std::span<uint32_t> mask) {
  for (; state.matched_tokens < output_tokens.size(); ++state.matched_tokens) {
    if (Status accepted = state.matcher->AcceptToken(output_tokens[state.matched_tokens]); !accepted.ok()) {
      std::fill(mask.begin(), mask.end(), 0u);
      return InternalError("structured output: output token " + std::to_string(state.matched_tokens) +
                           " does not follow the grammar: " + accepted.message());
    }
  }
  state.matcher->FillNextTokenMask(mask);
  return Status::Ok();
}

bool Engine::StepOnce(std::vector<EngineOutput>* outputs) {
  DrainEvents(outputs);
  scheduler::SchedulerOutput step = scheduler_->Schedule();
  EmitFinished(step, outputs);
  // What is known before the forward goes out before it: a remote prefill's first
  // token (CompleteReservation) and the finish records would otherwise wait a step.
  Flush(outputs);
  MarkScheduled(step);
  Status status = RunStep(step, outputs);
  if (!status.ok()) {
    // A failed forward or copy aborts the sequences of this step; the engine keeps serving.
    TANDEM_LOG_ERROR("engine step failed: {}", status.ToString());
    for (const scheduler::ScheduledSequence& s : step.scheduled) {
      if (scheduler_->Find(s.id) == nullptr) continue;  // already ended this step
      scheduler_->Cancel(s.id).IgnoreError();
      reported_.insert(s.id);
      outputs->push_back(EngineOutput{s.id, {}, true, scheduler::FinishReason::kAborted, status});
      outputs->back().times = TimesOf(s.id);
      requests_.erase(s.id);
    }
  } else if (!step.scheduled.empty() && step_observer_) {
    step_observer_(step);
  }
  scheduler::SchedulerCounters counters = scheduler_->Counters();
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_ = counters;
  }
  // A step that did nothing is repeated only after an event or the Loop's idle
  // wait: what it lacked (blocks of reservations, held KV, the quarantine) comes
  // back through one of those.
  return !step.scheduled.empty() || !step.finished.empty() || !step.preempted.empty();
}

}  // namespace tandem::engine
