// Engine: one node's model, KV cache and scheduler, driven by one
// engine thread. Other threads talk to it only through the thread-safe
// methods below, which post events to its queue; outputs come back through the
// OutputSink, called on the engine thread once per step.
//
// Step = drain events -> Scheduler::Schedule -> run block copies -> forward ->
// sample (Backend::SampleTokens: on the GPU, no logits leave the device) ->
// Scheduler::AppendToken -> emit outputs.
//
// Thread rule: Submit/Cancel/ReleaseHeld/Reserve/CompleteReservation/Post/Counters/SetStepObserver and the
// cache-report pair (TakeCacheReport, RequestFullCacheReport) are
// thread-safe; Start/Stop from the owning thread; everything else (StepOnce,
// the sink, observers) runs on the engine thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/base/clock.h"
#include "common/engine/backend_kv_storage.h"
#include "common/engine/engine_config.h"
#include "common/engine/structured_output.h"
#include "common/kv_cache/cache_report_buffer.h"
#include "common/model/model_config.h"
#include "common/runtime/backend.h"
#include "common/runtime/llama_model.h"
#include "common/runtime/paged_kv_cache.h"
#include "common/runtime/sampler.h"
#include "common/runtime/sampling_params.h"
#include "common/scheduler/scheduler.h"

namespace tandem::engine {

struct EngineRequest {
  RequestId id = 0;
  std::string tenant_salt;             // prefix-cache isolation (derived by the router)
  std::vector<TokenId> prompt_tokens;  // at least one
  scheduler::Priority priority = scheduler::Priority::kInteractive;
  runtime::SamplingParams sampling;  // max_tokens, stop ids, seed ... (validated on Submit)
  // Keep the KV blocks after a normal finish (stop, length) until ReleaseHeld or
  // Cancel: a prefill node reads them out of the device pool after the step.
  bool hold_kv_after_finish = false;
};

// Where one request's time went in the engine (vLLM's request phases), on the
// engine's clock. Arrival is the Submit or Reserve call; admission is the first
// step that computes for it (Submit) or the granted reservation (Reserve).
struct RequestTimes {
  bool admitted = false;            // it got its KV
  bool first_token = false;         // it has a first token
  bool remote_first_token = false;  // that token came with CompleteReservation (prefilled elsewhere)
  double queued_seconds = 0;        // arrival to admission (to the end, when never admitted)
  double prefill_seconds = 0;       // admission to the first token (a reservation: waiting for the remote KV)
  double decode_seconds = 0;        // first token to last token
};

// What happened to one request in one step.
struct EngineOutput {
  RequestId id = 0;
  std::vector<TokenId> tokens;  // sampled this step (usually one)
  bool finished = false;
  // With finished:
  scheduler::FinishReason finish_reason = scheduler::FinishReason::kStop;
  Status status;  // non-OK when rejected or aborted
  int num_prompt_tokens = 0;
  int num_generated_tokens = 0;
  // With a request's first token and with finished: prompt tokens served from the prefix cache.
  int num_cached_tokens = 0;
  RequestTimes times;  // with finished, and with a request's first token (its queue and prefill parts)
  // One per token when the request's sampling.logprobs >= 0, else empty.
  std::vector<runtime::SampledLogprobs> logprobs;
  // With a request's first token when its sampling.prompt_logprobs >= 0: one per prompt
  // token after the first (that token's logprob given the tokens before it).
  std::vector<runtime::SampledLogprobs> prompt_logprobs;
};

using OutputSink = std::function<void(std::vector<EngineOutput>&&)>;
// After each step whose forward ran, on the engine thread (metrics: tokens per step).
using StepObserver = std::function<void(const scheduler::SchedulerOutput& step)>;
// Hooks into each step's forward, on the engine thread; a prefill node uses them
// to stream KV out layer by layer while later layers compute. The step's KV
// blocks are not reused before on_end returns.
struct ForwardObserver {
  // Before the forward of `step`; true asks for on_layer calls this step (the
  // step then runs eagerly, not as a CUDA graph).
  std::function<bool(const scheduler::SchedulerOutput& step)> on_begin;
  // After layer `layer`'s ops are issued (a GPU may still be running them).
  std::function<void(int layer)> on_layer;
  // After the forward was issued (or failed: `status`), before sampling.
  std::function<void(const scheduler::SchedulerOutput& step, const Status& status)> on_end;
};

class Engine {
 public:
  // Loads the model from config.model_dir onto `backend` and sizes the KV tiers.
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config, std::unique_ptr<runtime::Backend> backend,
                                                  const Clock& clock = Clock::Real());
  ~Engine();

  // --- thread-safe ---
  // Queues a request; a refusal comes back as a finished output with status.
  void Submit(EngineRequest request);
  // Ends a request; on one whose KV is held, releases the KV (its end was already emitted).
  void Cancel(RequestId id);
  // Releases the KV a finished hold_kv_after_finish request still holds; unknown ids are ignored.
  void ReleaseHeld(RequestId id);
  // Holds device blocks for KV computed elsewhere; `done` runs on the engine thread.
  void Reserve(EngineRequest request, int64_t lease_ms, std::function<void(StatusOr<scheduler::Reservation>)> done);
  // The reserved KV has landed; the request joins the running batch.
  // `prompt_logprobs`: the remote prefill's, passed on with the first token when asked for.
  void CompleteReservation(RequestId id, TokenId first_token, runtime::SampledLogprobs first_token_logprobs = {},
                           std::vector<runtime::SampledLogprobs> prompt_logprobs = {});
  // Runs `fn` on the engine thread before the next step.
  void Post(std::function<void()> fn);
  // A copy of the counters as of the last step.
  scheduler::SchedulerCounters Counters() const;
  // CPU time the engine thread has spent (its steps and everything it runs), seconds;
  // as of its last step or wake-up. Thread-safe. The thread is named "tandem-engine".
  double CpuSeconds() const { return cpu_seconds_.load(std::memory_order_relaxed); }
  // The engine thread's id (ThisThreadId) once it runs, else 0: how long it waited for a
  // core is ThreadRunQueueWaitSeconds(ThreadId()).
  int ThreadId() const { return thread_id_.load(std::memory_order_relaxed); }
  // Wakes the loop; used after external state changes.
  void Wake();
  // Replaces the step observer; takes effect before the next step.
  void SetStepObserver(StepObserver observer);
  // Prefix-cache changes (stored/removed block hashes), at most max_hashes, for
  // heartbeats; nullopt when there is nothing new (kv_cache/cache_report_buffer.h).
  std::optional<kv_cache::CacheEvents> TakeCacheReport(size_t max_hashes) { return cache_reports_.Take(max_hashes); }
  // Coming reports start over with the full set (reset); ready after the next step.
  void RequestFullCacheReport();

  // --- owning thread ---
  // Starts the engine thread. `sink` receives every step's outputs.
  void Start(OutputSink sink);
  // Stops and joins the engine thread; queued events are dropped.
  void Stop();

  // --- engine thread (or a test driving it) ---
  // Drains events and runs one step. Returns true when the step did something
  // (scheduled, finished or preempted): the next one may do more at once. With a
  // sink (Start), what the events and the schedule produced goes to it before
  // the forward; the forward's outputs are left in `outputs`.
  bool StepOnce(std::vector<EngineOutput>* outputs);
  void SetForwardObserver(ForwardObserver observer) { observer_ = std::move(observer); }

  const model::ModelConfig& model_config() const { return model_config_; }
  const EngineConfig& config() const { return config_; }
  const std::vector<TokenId>& eos_token_ids() const { return eos_token_ids_; }
  runtime::PagedKvCache& device_kv() { return *device_kv_; }
  kv_cache::KvTierStorage& storage() { return *storage_; }
  runtime::Backend& backend() { return *backend_; }
  int max_model_len() const { return config_.scheduler.max_model_len; }

 private:
  struct RequestState {
    runtime::SamplingParams sampling;
    uint64_t seed = 0;
    // Phase boundaries on clock_ (0: not yet); see RequestTimes.
    Nanos arrived_at = 0;
    Nanos admitted_at = 0;
    Nanos first_token_at = 0;
    Nanos last_token_at = 0;
    bool remote_first_token = false;
    // Structured output (sampling.structured_output): the grammar's position, which has
    // accepted the first `matched_tokens` output tokens; null for free text.
    std::unique_ptr<grammar::GrammarMatcher> matcher;
    size_t matched_tokens = 0;
    // Prompt logprobs computed so far (positions 1 .. size()), sent with the first token.
    std::vector<runtime::SampledLogprobs> prompt_logprobs;
  };

  Engine(const EngineConfig& config, const Clock& clock);
  Status Init(std::unique_ptr<runtime::Backend> backend);
  // `arrived_at`: when Submit or Reserve was called.
  StatusOr<scheduler::SequenceParams> Admit(const EngineRequest& request, Nanos arrived_at);
  // Admission and token times of this step's requests.
  void MarkScheduled(const scheduler::SchedulerOutput& step);
  // The phases of a request that ends now. REQUIRES: it is in requests_ (else all zero).
  RequestTimes TimesOf(RequestId id) const;
  void DrainEvents(std::vector<EngineOutput>* outputs);
  Status RunStep(const scheduler::SchedulerOutput& step, std::vector<EngineOutput>* outputs);
  // Samples the step's rows on the backend (Backend::SampleTokens) and appends
  // the tokens; a row with no token left aborts only its request.
  Status SampleStep(const scheduler::SchedulerOutput& step, runtime::Tensor logits, std::vector<EngineOutput>* outputs);
  void EmitFinished(const scheduler::SchedulerOutput& step, std::vector<EngineOutput>* outputs);
  // The allowed-token mask of a structured-output row into `mask` (MaskWords words): the
  // matcher first accepts the output tokens it has not seen (the last step's, a remote first
  // token, a moved request's). A token the grammar refuses fails the row (mask all zero).
  Status FillTokenMask(RequestState& state, std::span<const TokenId> output_tokens, std::span<uint32_t> mask);
  // The prompt logprobs of an all_logits chunk from its logits rows (one per new token).
  Status RecordPromptLogprobs(const scheduler::ScheduledSequence& s, runtime::Tensor rows);
  // Backend::SampleTokens over `rows` of `logits` (one call per run of consecutive rows).
  Status SampleRows(runtime::Tensor logits, std::span<const int64_t> rows, std::span<const runtime::SampleRequest> requests,
                    std::span<runtime::SampledToken> out);
  // Hands `outputs` to the sink (if any) and leaves it empty.
  void Flush(std::vector<EngineOutput>* outputs);
  void Loop();

  EngineConfig config_;
  const Clock& clock_;
  model::ModelConfig model_config_;
  std::vector<TokenId> eos_token_ids_;
  std::unique_ptr<runtime::Backend> backend_;
  std::unique_ptr<runtime::LlamaModel> model_;
  std::unique_ptr<runtime::PagedKvCache> device_kv_;
  std::unique_ptr<kv_cache::KvTierStorage> storage_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<StructuredOutput> structured_output_;
  std::vector<uint32_t> masks_;  // this step's structured-output masks, one per such row
  std::unordered_map<RequestId, RequestState> requests_;
  // Requests whose end was already emitted (aborted mid-step); their scheduler
  // finish record is swallowed so each request ends exactly once.
  std::unordered_set<RequestId> reported_;
  ForwardObserver observer_;
  StepObserver step_observer_;
  kv_cache::CacheEventLog cache_log_;          // engine thread; the KV manager records into it
  kv_cache::CacheReportBuffer cache_reports_;  // thread-safe; filled after every step of Loop()

  mutable std::mutex mu_;  // guards events_, counters_, stop_
  std::condition_variable cv_;
  std::deque<std::function<void(std::vector<EngineOutput>*)>> events_;
  scheduler::SchedulerCounters counters_;
  std::atomic<int> thread_id_{0};
  std::atomic<double> cpu_seconds_{0};  // the engine thread's CPU time, as of its last step or wake-up
  bool stop_ = false;
  OutputSink sink_;
  std::thread thread_;
};

}  // namespace tandem::engine
