#include "router/completion_call.h"

#include <boost/asio/post.hpp>

#include <chrono>

#include "common/base/logging.h"
#include "router/request_fields.h"
#include "router/response_format.h"
#include "router/sse_writer.h"

namespace tandem::router {
namespace {

ApiError ContextError(std::string message, std::string param) {
  return BadRequest(std::move(message), std::move(param), "context_length_exceeded");
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

CompletionCall::CompletionCall(RouterContext* context, std::shared_ptr<ResponseSink> sink,
                               boost::asio::any_io_executor strand, ApiKind kind, ApiKeyGrant grant)
    : context_(context),
      sink_(std::move(sink)),
      strand_(strand),
      kind_(kind),
      grant_(std::move(grant)),
      queue_timer_(strand),
      deadline_timer_(strand) {}

void CompletionCall::Run(const std::string& body) {
  arrival_ns_ = Clock::Real().NowNanos();
  if (std::optional<ApiError> error = Prepare(body)) return Fail(*error);
  if (!context_->Ready()) {
    const bool draining = context_->draining.load();
    context_->metrics.OnRejected(draining ? "draining" : "no_nodes");
    ApiError error =
        ApiErrorFromStatus(UnavailableError(draining ? "the router is draining" : "the server is not ready"));
    return Fail(error, context_->config.retry_after_s);
  }
  Admit();
}

std::optional<ApiError> CompletionCall::Prepare(const std::string& body) {
  const RouterConfig& config = context_->config;
  nlohmann::json json;
  if (auto error = ParseJsonBody(body, config.max_json_depth, &json)) return error;
  RequestLimits limits;
  limits.vocab_size = context_->deps.model.vocab_size;
  limits.max_n = config.max_n;
  limits.max_prompts = config.max_prompts;
  limits.max_messages = config.max_messages;
  limits.max_stop_strings = config.max_stop_strings;
  limits.max_stop_string_bytes = config.max_stop_string_bytes;
  limits.max_json_depth = config.max_json_depth;
  auto error = kind_ == ApiKind::kChat ? ParseChatRequest(json, limits, &request_)
                                       : ParseCompletionRequest(json, limits, &request_);
  if (!request_.ignored_fields.empty()) {
    sink_->AddHeader(kIgnoredFieldsHeader, IgnoredFieldsHeaderValue(request_.ignored_fields));
  }
  if (error) return error;
  if (!request_.model.empty() && request_.model != context_->ModelName()) {
    ApiError not_found = BadRequest("The model `" + request_.model + "` does not exist.", "model", "model_not_found");
    not_found.http_status = 404;
    return not_found;
  }
  return Tokenize(request_);
}

std::optional<ApiError> CompletionCall::Tokenize(const ApiRequest& request) {
  const TextCodec& codec = *context_->deps.codec;
  const int32_t context_tokens = context_->deps.model.max_context_tokens;
  const char* prompt_param = kind_ == ApiKind::kChat ? "messages" : "prompt";
  if (kind_ == ApiKind::kChat) {
    if (auto error =
            tool_calls_.Configure(request.tools, context_->deps.model.tool_call_format, &spec_.base.structured_output)) {
      return error;
    }
    ChatRenderOptions options;
    options.add_generation_prompt = request.add_generation_prompt;
    options.template_kwargs = request.chat_template_kwargs;
    options.tools = request.tools.tools;
    StatusOr<std::string> text = codec.RenderChat(request.messages, options);
    if (!text.ok()) return ApiErrorFromStatus(text.status(), "messages");
    StatusOr<std::vector<TokenId>> ids = codec.Encode(*text, request.add_special_tokens);
    if (!ids.ok()) return ApiErrorFromStatus(ids.status(), "messages");
    spec_.prompts.push_back(std::move(*ids));
  } else {
    for (const PromptInput& prompt : request.prompts) {
      if (prompt.is_token_ids) {
        spec_.prompts.push_back(prompt.token_ids);
        continue;
      }
      StatusOr<std::vector<TokenId>> ids = codec.Encode(prompt.text, request.add_special_tokens);
      if (!ids.ok()) return ApiErrorFromStatus(ids.status(), "prompt");
      spec_.prompts.push_back(std::move(*ids));
    }
  }
  int64_t longest = 0;
  for (const auto& prompt : spec_.prompts) {
    if (prompt.empty()) return BadRequest("the prompt is empty after tokenization", prompt_param);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.size()));
  }
  if (longest >= context_tokens) {
    return ContextError("This model's maximum context length is " + std::to_string(context_tokens) +
                            " tokens. However, your prompt has " + std::to_string(longest) + " tokens.",
                        prompt_param);
  }
  const int64_t room = context_tokens - longest;
  int64_t max_tokens = request.max_tokens.value_or(0);
  if (!request.max_tokens) {
    // OpenAI defaults: 16 for completions, the rest of the context for chat.
    max_tokens = kind_ == ApiKind::kChat ? room : std::min<int64_t>(16, room);
  } else if (max_tokens > room) {
    return ContextError("This model's maximum context length is " + std::to_string(context_tokens) +
                            " tokens. However, you requested " + std::to_string(longest + max_tokens) + " tokens (" +
                            std::to_string(longest) + " in the prompt, " + std::to_string(max_tokens) +
                            " for the completion).",
                        kind_ == ApiKind::kChat && !request.max_tokens ? "messages" : "max_tokens");
  }
  if (request.min_tokens > max_tokens) {  // max_tokens was not given: its default is the bound
    return BadRequest("min_tokens (" + std::to_string(request.min_tokens) + ") exceeds the default max_tokens (" +
                          std::to_string(max_tokens) + "); set max_tokens",
                      "min_tokens");
  }
  GenerateRequest& base = spec_.base;
  base.sampling = request.sampling;
  base.max_tokens = static_cast<int32_t>(max_tokens);
  base.min_tokens = request.min_tokens;
  base.stop_token_ids = request.stop_token_ids;
  base.ignore_eos = request.ignore_eos;
  base.logit_bias = request.logit_bias;
  base.logprobs = request.logprobs;
  // tool_choice required / a named function set base.structured_output (Tokenize); a
  // response_format or guided_json cannot constrain the same output too.
  if (!request.structured_output.empty()) {
    if (!base.structured_output.empty()) {
      return BadRequest("tool_choice required or a named function cannot be combined with response_format or "
                        "guided_json",
                        "tool_choice");
    }
    base.structured_output = request.structured_output;
  } else if (!base.structured_output.empty()) {
    if (std::optional<ApiError> e = CheckStructuredOutput(base.structured_output, "tool_choice")) return e;
  }
  if (request.echo) {
    // The prompt's logprobs come from the prefill; max_tokens 0 still samples one token, dropped.
    base.prompt_logprobs = request.logprobs;
    spec_.echo_only = max_tokens == 0;
    if (spec_.echo_only) base.max_tokens = 1;
    for (const PromptInput& prompt : request.prompts) {
      if (!prompt.is_token_ids) {
        spec_.echo_texts.push_back(prompt.text);
        continue;
      }
      StatusOr<std::string> text = context_->deps.codec->Decode(prompt.token_ids, /*skip_special_tokens=*/false);
      if (!text.ok()) return ApiErrorFromStatus(text.status(), "prompt");
      spec_.echo_texts.push_back(std::move(*text));
    }
  }
  base.trace_timing = request.include_timing;
  base.tenant_id = grant_.tenant;
  base.priority = PriorityClassOf(grant_.PriorityFor(request.priority));
  const int32_t timeout_ms = context_->config.request_timeout_ms;
  if (timeout_ms > 0) base.deadline_ns = Clock::Real().NowNanos() + MsToNanos(timeout_ms);
  deadline_ns_ = base.deadline_ns;
  spec_.n = request.n;
  spec_.stop = request.stop;
  spec_.include_stop_str_in_output = request.include_stop_str_in_output;
  spec_.skip_special_tokens = request.skip_special_tokens;
  spec_.eos_token_ids = context_->deps.model.eos_token_ids;
  return std::nullopt;
}

void CompletionCall::Admit() {
  std::weak_ptr<CompletionCall> weak = weak_from_this();
  boost::asio::any_io_executor strand = strand_;
  RouterContext* context = context_;
  auto on_admitted = [weak, strand, context] {
    boost::asio::post(strand, [weak, context] {
      if (auto self = weak.lock()) {
        self->OnAdmitted();
      } else {
        context->admission.Release();  // the call is gone; the slot goes back
      }
    });
  };
  queued_ns_ = Clock::Real().NowNanos();
  const auto outcome = context_->admission.Acquire(spec_.base.priority, on_admitted, &ticket_);
  UpdateLoad();
  switch (outcome) {
    case AdmissionController::Outcome::kAdmitted:
      admitted_ns_ = queued_ns_;
      holds_slot_ = true;
      state_ = State::kRunning;
      context_->metrics.OnAdmitted(0.0);
      return StartJob();
    case AdmissionController::Outcome::kRejected: {
      context_->metrics.OnRejected("queue_full");
      ApiError error = ApiErrorFromStatus(ResourceExhaustedError("too many requests; retry later"));
      return Fail(error, context_->config.retry_after_s);
    }
    case AdmissionController::Outcome::kQueued:
      state_ = State::kQueued;
      queue_timer_.expires_after(std::chrono::milliseconds(context_->config.max_queue_wait_ms));
      queue_timer_.async_wait([weak](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (ec || !self || self->state_ != State::kQueued) return;
        if (!self->context_->admission.CancelQueued(self->ticket_)) return;  // admitted meanwhile
        self->context_->metrics.OnRejected("overloaded");
        ApiError error = ApiErrorFromStatus(ResourceExhaustedError("timed out waiting for capacity; retry later"));
        self->Fail(error, self->context_->config.retry_after_s);
      });
      return;
  }
}

void CompletionCall::OnAdmitted() {
  if (state_ != State::kQueued) {  // client gone or timed out while the slot was in flight
    context_->admission.Release();
    return;
  }
  queue_timer_.cancel();
  holds_slot_ = true;
  state_ = State::kRunning;
  admitted_ns_ = Clock::Real().NowNanos();
  context_->metrics.OnAdmitted(static_cast<double>(Clock::Real().NowNanos() - queued_ns_) * 1e-9);
  UpdateLoad();
  StartJob();
}

void CompletionCall::StartJob() {
  meta_.kind = kind_;
  meta_.id = request_.request_id.empty() ? NewResponseId(kind_) : ResponseIdFor(kind_, request_.request_id);
  meta_.created = UnixSeconds();
  meta_.model = context_->ModelName();
  auto self = shared_from_this();
  JobEvents events;
  if (request_.stream && tool_calls_.active()) {
    events.on_text = [self](int32_t index, const std::string& text, std::vector<ChoiceLogprob> entries) {
      self->StreamToolText(index, text, std::move(entries));
    };
    events.on_choice_done = [self](int32_t index, FinishReason reason, std::vector<ChoiceLogprob> entries) {
      self->StreamToolEnd(index, reason, std::move(entries));
    };
  } else if (request_.stream) {
    const bool usage_null = request_.include_usage;
    const bool logprobs = request_.logprobs >= 0;
    events.on_text = [self, usage_null, logprobs](int32_t index, const std::string& text,
                                                  std::vector<ChoiceLogprob> entries) {
      self->BeginStream();
      self->sink_->WriteStream(SseJsonEvent(
          StreamChunk(self->meta_, index, text, std::nullopt, false, usage_null, logprobs ? &entries : nullptr)));
    };
    events.on_choice_done = [self, usage_null, logprobs](int32_t index, FinishReason reason,
                                                         std::vector<ChoiceLogprob> entries) {
      self->BeginStream();
      self->sink_->WriteStream(
          SseJsonEvent(StreamChunk(self->meta_, index, "", reason, false, usage_null, logprobs ? &entries : nullptr)));
    };
  }
  events.on_tokens = [self](int32_t index, int32_t count) { self->RecordTokens(index, count); };
  events.on_done = [self](const Status& status) { self->OnJobDone(status); };
  boost::asio::any_io_executor strand = strand_;
  GenerationJob::Post post = [strand](std::function<void()> fn) { boost::asio::post(strand, std::move(fn)); };
  job_ = GenerationJob::Create(context_->deps.engine, context_->deps.codec, std::move(post), std::move(spec_),
                               std::move(events));
  if (deadline_ns_ > 0) {
    // The deadline counts from arrival, so time spent queued is part of it.
    std::weak_ptr<CompletionCall> weak = self;
    const Nanos left_ns = std::max<Nanos>(0, deadline_ns_ - Clock::Real().NowNanos());
    deadline_timer_.expires_after(std::chrono::nanoseconds(left_ns));
    deadline_timer_.async_wait([weak](const boost::system::error_code& ec) {
      auto call = weak.lock();
      if (ec || !call || call->state_ != State::kRunning) return;
      call->job_->Cancel();
      call->OnJobDone(DeadlineExceededError("the request deadline passed"));
    });
  }
  job_->Start();
}

void CompletionCall::BeginStream() {
  if (streaming_ || !sink_) return;
  streaming_ = true;
  if (request_.include_timing) sink_->AddHeader("server-timing", ServerTimingHeader(Timing(0)));
  sink_->BeginStream();
  if (kind_ == ApiKind::kChat) {  // the first chunk of each choice carries the role
    for (int32_t i = 0; i < job_->num_choices(); ++i) {
      sink_->WriteStream(SseJsonEvent(StreamChunk(meta_, i, "", std::nullopt, true, request_.include_usage)));
    }
  }
}

void CompletionCall::OnJobDone(const Status& status) {
  if (state_ != State::kRunning) return;
  if (status.ok() && request_.stream) BeginStream();
  std::shared_ptr<ResponseSink> sink = sink_;
  Finish();
  if (!status.ok()) {
    TANDEM_LOG_WARN("request {} failed: {}", meta_.id, status.ToString());
    context_->metrics.OnChoiceFinished("error");
    // Before any output the status says what happened (a refusal: 400, 429, ...);
    // after it, the server failed a request it had taken on.
    const bool had_output = streaming_ || first_token_seen_;
    return Fail(had_output ? ApiErrorAfterOutput(status) : ApiErrorFromStatus(status));
  }
  for (const ChoiceOutput& choice : job_->outputs()) {
    context_->metrics.OnChoiceFinished(FinishReasonName(choice.finish_reason));
  }
  const Nanos now = Clock::Real().NowNanos();
  context_->metrics.OnRequestFinished(job_->usage().prompt_tokens, job_->usage().completion_tokens, job_->num_choices(),
                                      static_cast<double>(now - arrival_ns_) * 1e-9,
                                      first_token_seen_ ? static_cast<double>(now - first_token_ns_) * 1e-9 : 0.0);
  Usage usage = job_->usage();
  if (request_.include_timing) usage.timing = TimingJson(Timing(now));
  if (streaming_) {
    if (request_.include_usage) sink->WriteStream(SseJsonEvent(UsageChunk(meta_, usage)));
    sink->WriteStream(std::string(kSseDone));
    sink->EndStream(/*close_connection=*/false);
  } else {
    if (request_.include_timing) sink->AddHeader("server-timing", ServerTimingHeader(Timing(now)));
    std::vector<ChoiceOutput> outputs = job_->outputs();
    tool_calls_.Apply(&outputs);
    sink->Respond(200, DumpJson(CompletionBody(meta_, outputs, usage, request_.logprobs >= 0)), -1);
  }
  sink_.reset();
}

void CompletionCall::StreamToolText(int32_t index, const std::string& text, std::vector<ChoiceLogprob> entries) {
  if (held_logprobs_.size() <= static_cast<size_t>(index)) held_logprobs_.resize(index + 1);
  std::vector<ChoiceLogprob>& held = held_logprobs_[index];
  held.insert(held.end(), std::make_move_iterator(entries.begin()), std::make_move_iterator(entries.end()));
  std::vector<nlohmann::json> deltas = tool_calls_.Feed(index, text);
  if (deltas.empty()) return;
  BeginStream();
  const bool logprobs = request_.logprobs >= 0;
  for (nlohmann::json& delta : deltas) {
    std::vector<ChoiceLogprob> carried = std::exchange(held, {});
    sink_->WriteStream(SseJsonEvent(ChatDeltaChunk(meta_, index, std::move(delta), std::nullopt,
                                                   request_.include_usage, logprobs ? &carried : nullptr)));
  }
}

void CompletionCall::StreamToolEnd(int32_t index, FinishReason reason, std::vector<ChoiceLogprob> entries) {
  if (held_logprobs_.size() <= static_cast<size_t>(index)) held_logprobs_.resize(index + 1);
  std::vector<ChoiceLogprob> held = std::exchange(held_logprobs_[index], {});
  held.insert(held.end(), std::make_move_iterator(entries.begin()), std::make_move_iterator(entries.end()));
  BeginStream();
  const bool logprobs = request_.logprobs >= 0;
  for (nlohmann::json& delta : tool_calls_.Finish(index)) {
    std::vector<ChoiceLogprob> carried = std::exchange(held, {});
    sink_->WriteStream(SseJsonEvent(ChatDeltaChunk(meta_, index, std::move(delta), std::nullopt,
                                                   request_.include_usage, logprobs ? &carried : nullptr)));
  }
  sink_->WriteStream(SseJsonEvent(ChatDeltaChunk(meta_, index, nlohmann::json::object(),
                                                 tool_calls_.ShownFinishReason(index, reason), request_.include_usage,
                                                 logprobs ? &held : nullptr)));
}

void CompletionCall::Fail(const ApiError& error, int retry_after_s) {
  Finish();
  if (!sink_) return;
  if (streaming_) {
    // Terminal outcome once streaming began: an error event, [DONE], close.
    sink_->WriteStream(SseJsonEvent(error.ToJson()));
    sink_->WriteStream(std::string(kSseDone));
    sink_->EndStream(/*close_connection=*/true);
  } else {
    sink_->Respond(error.http_status, error.ToBody(), retry_after_s);
  }
  sink_.reset();
}

void CompletionCall::OnClientGone() {
  if (state_ == State::kQueued) {
    // If it was admitted meanwhile, OnAdmitted sees kDone and releases the slot.
    context_->admission.CancelQueued(ticket_);
  }
  if (job_ && state_ == State::kRunning) context_->metrics.OnChoiceFinished("abort");
  if (job_) job_->Cancel();
  Finish();
  sink_.reset();
}

void CompletionCall::RecordTokens(int32_t index, int32_t count) {
  const Nanos now = Clock::Real().NowNanos();
  if (!first_token_seen_) {
    first_token_seen_ = true;
    first_token_ns_ = now;
    context_->metrics.OnFirstToken(static_cast<double>(now - arrival_ns_) * 1e-9);
  }
  if (last_batch_ns_.empty()) last_batch_ns_.assign(job_->num_choices(), 0);
  Nanos& last = last_batch_ns_[index];
  if (index == 0 && second_token_ns_ == 0 && (last != 0 || count > 1)) second_token_ns_ = now;
  // The first batch of a choice is the first token (TTFT); gaps start after it.
  if (last != 0) {
    context_->metrics.OnTokens(static_cast<double>(now - last) * 1e-9, count);
  } else if (count > 1) {
    context_->metrics.OnTokens(0.0, count - 1);
  }
  last = now;
}

RequestTiming CompletionCall::Timing(Nanos end_ns) const {
  auto seconds = [](Nanos from, Nanos to) { return static_cast<double>(to - from) * 1e-9; };
  RequestTiming t;
  t.router_queue = admitted_ns_ != 0 ? seconds(queued_ns_, admitted_ns_) : 0.0;
  if (job_) t.nodes = job_->stage_times(0);
  if (first_token_seen_) t.first_token = seconds(arrival_ns_, first_token_ns_);
  if (end_ns == 0) return t;
  if (second_token_ns_ != 0) {
    t.first_decode_step = seconds(first_token_ns_, second_token_ns_);
    t.decode = seconds(second_token_ns_, end_ns);
  }
  t.total = seconds(arrival_ns_, end_ns);
  return t;
}

void CompletionCall::UpdateLoad() const {
  context_->admission.Publish(
      [this](int32_t running, int32_t queued) { context_->metrics.SetLoad(running, queued); });
}

void CompletionCall::Finish() {
  state_ = State::kDone;
  queue_timer_.cancel();
  deadline_timer_.cancel();
  if (holds_slot_) {
    holds_slot_ = false;
    context_->admission.Release();
  }
  UpdateLoad();
}

}  // namespace tandem::router
