#include "common/engine/engine.h"

#include <pthread.h>

#include <chrono>
#include <random>

#include "common/base/cpu_time.h"
#include "common/base/logging.h"
#include "common/model/weights.h"
#include "common/runtime/paged_kv_cache.h"

namespace tandem::engine {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Engine::Engine(const EngineConfig& config, const Clock& clock) : config_(config), clock_(clock) {}

Engine::~Engine() { Stop(); }

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config, std::unique_ptr<runtime::Backend> backend,
                                                 const Clock& clock) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<Engine> engine(new Engine(config, clock));
  TANDEM_RETURN_IF_ERROR(engine->Init(std::move(backend)));
  return engine;
}

Status Engine::Init(std::unique_ptr<runtime::Backend> backend) {
  const auto start = std::chrono::steady_clock::now();
  backend_ = std::move(backend);
  TANDEM_ASSIGN_OR_RETURN(model_config_, model::LoadModelConfig(config_.model_dir));
  TANDEM_ASSIGN_OR_RETURN(model::GenerationConfig generation, model::LoadGenerationConfig(config_.model_dir));
  eos_token_ids_ = model_config_.eos_token_ids;
  for (int id : generation.eos_token_ids) {
    if (std::find(eos_token_ids_.begin(), eos_token_ids_.end(), id) == eos_token_ids_.end()) {
      eos_token_ids_.push_back(id);
    }
  }
  structured_output_ =
      std::make_unique<StructuredOutput>(config_.model_dir, model_config_.vocab_size, eos_token_ids_);
  int& max_len = config_.scheduler.max_model_len;
  if (max_len <= 0 || max_len > model_config_.max_position_embeddings) {
    max_len = model_config_.max_position_embeddings;
  }
  TANDEM_RETURN_IF_ERROR(config_.scheduler.Validate());

  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelWeights> weights, model::ModelWeights::Open(config_.model_dir));
  const double open_s = SecondsSince(start);
  runtime::RuntimeOptions options;
  options.max_num_tokens = config_.scheduler.max_num_batched_tokens;
  options.max_num_seqs = config_.scheduler.max_num_seqs;
  // A row per sequence, plus the prompt positions of prompt logprobs.
  options.max_logits_rows = config_.scheduler.max_num_seqs + config_.scheduler.max_prompt_logits_tokens;
  options.max_model_len = max_len;
  options.kv_block_size = config_.block_size;
  // Graph-replaying backends get decode batches padded to bucket sizes.
  options.pad_decode_batches = backend_->device() == runtime::Device::kCuda;
  const auto model_start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(model_, runtime::LlamaModel::Create(model_config_, *weights, backend_.get(), options));
  const double model_s = SecondsSince(model_start);

  int num_blocks = config_.num_device_blocks;
  if (num_blocks == 0) {
    kv_cache::KvLayout one = model_->KvLayoutFor(1);
    one.dtype = backend_->compute_dtype();
    num_blocks = static_cast<int>(config_.kv_cache_bytes / static_cast<int64_t>(one.TotalBytes()));
  }
  if (num_blocks < 1) return InvalidArgumentError("KV cache too small for one block");
  kv_cache::KvLayout layout = model_->KvLayoutFor(num_blocks);
  layout.dtype = backend_->compute_dtype();
  const auto kv_start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(runtime::PagedKvCache pool, runtime::PagedKvCache::Create(backend_.get(), layout));
  device_kv_ = std::make_unique<runtime::PagedKvCache>(std::move(pool));
  const double kv_s = SecondsSince(kv_start);
  const auto host_start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(storage_, backend_->CreateKvTierStorage(device_kv_->pool(), layout, config_.num_host_blocks));
  if (storage_ == nullptr) {
    storage_ = std::make_unique<BackendKvTierStorage>(backend_.get(), device_kv_.get(), config_.num_host_blocks);
  }
  const double host_s = SecondsSince(host_start);

  kv_cache::KvCacheConfig kv;
  kv.block_size = config_.block_size;
  kv.num_device_blocks = num_blocks;
  kv.num_host_blocks = config_.num_host_blocks;
  kv.model_id = config_.model_name;
  kv.enable_prefix_caching = config_.enable_prefix_caching;
  kv.event_log = &cache_log_;
  TANDEM_RETURN_IF_ERROR(kv.Validate());
  scheduler_ = std::make_unique<scheduler::Scheduler>(config_.scheduler, kv, clock_);
  counters_ = scheduler_->Counters();
  TANDEM_LOG_INFO("engine: model {} ({} layers), {} device KV blocks, {} host KV blocks, max_model_len {}",
                  config_.model_name, model_config_.num_layers, num_blocks, config_.num_host_blocks, max_len);
  kv_cache::KvLayout host_layout = layout;
  host_layout.num_blocks = config_.num_host_blocks;
  TANDEM_LOG_INFO(
      "engine: ready in {:.2f} s (opening the model {:.2f} s, model {:.2f} s; device KV pool {:.2f} GB "
      "allocated in {:.2f} s, host KV tier {:.2f} GB in {:.2f} s)",
      SecondsSince(start), open_s, model_s, layout.TotalBytes() / 1e9, kv_s, host_layout.TotalBytes() / 1e9, host_s);
  return Status::Ok();
}

StatusOr<scheduler::SequenceParams> Engine::Admit(const EngineRequest& request, Nanos arrived_at) {
  // An id stays taken until its end has been emitted.
  if (requests_.count(request.id) > 0) {
    return AlreadyExistsError("request " + std::to_string(request.id) + " is still active");
  }
  TANDEM_RETURN_IF_ERROR(request.sampling.Validate());
  for (TokenId t : request.prompt_tokens) {
    if (t < 0 || t >= model_config_.vocab_size) {
      return InvalidArgumentError("prompt token id " + std::to_string(t) + " out of range");
    }
  }
  if (request.sampling.num_output_tokens_in_prompt >= static_cast<int>(request.prompt_tokens.size())) {
    return InvalidArgumentError("num_output_tokens_in_prompt " +
                                std::to_string(request.sampling.num_output_tokens_in_prompt) +
                                " leaves no prompt in a prompt of " + std::to_string(request.prompt_tokens.size()));
  }
  scheduler::SequenceParams params;
  params.id = request.id;
  params.tenant_salt = request.tenant_salt;
  params.prompt_tokens = request.prompt_tokens;
  params.priority = request.priority;
  params.hold_kv_after_finish = request.hold_kv_after_finish;
  params.prompt_logits = request.sampling.prompt_logprobs >= 0;
  TANDEM_ASSIGN_OR_RETURN(params.max_tokens,
                          runtime::EffectiveMaxTokens(request.sampling, static_cast<int>(request.prompt_tokens.size()),
                                                      config_.scheduler.max_model_len));
  params.stop_token_ids = request.sampling.stop_token_ids;
  if (!request.sampling.ignore_eos) {
    params.stop_token_ids.insert(params.stop_token_ids.end(), eos_token_ids_.begin(), eos_token_ids_.end());
  }
  RequestState state;
  if (!request.sampling.structured_output.empty()) {
    TANDEM_ASSIGN_OR_RETURN(state.matcher, structured_output_->NewMatcher(request.sampling));
  }
  state.sampling = request.sampling;
  state.seed = request.sampling.seed ? *request.sampling.seed : std::random_device{}();
  state.arrived_at = arrived_at;
  requests_[request.id] = std::move(state);
  return params;
}

namespace {

EngineOutput Rejected(RequestId id, Status status) {
  EngineOutput out;
  out.id = id;
  out.finished = true;
  out.finish_reason = scheduler::FinishReason::kRejected;
  out.status = std::move(status);
  return out;
}

}  // namespace

RequestTimes Engine::TimesOf(RequestId id) const {
  RequestTimes times;
  auto it = requests_.find(id);
  if (it == requests_.end()) return times;
  const RequestState& s = it->second;
  auto seconds = [](Nanos from, Nanos to) { return static_cast<double>(to - from) * 1e-9; };
  times.admitted = s.admitted_at != 0;
  times.first_token = s.first_token_at != 0;
  times.remote_first_token = s.remote_first_token;
  times.queued_seconds = seconds(s.arrived_at, times.admitted ? s.admitted_at : clock_.NowNanos());
  if (times.admitted && times.first_token) times.prefill_seconds = seconds(s.admitted_at, s.first_token_at);
  if (times.first_token) times.decode_seconds = seconds(s.first_token_at, s.last_token_at);
  return times;
}

void Engine::Submit(EngineRequest request) {
  const Nanos arrived_at = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back([this, request = std::move(request), arrived_at](std::vector<EngineOutput>* outputs) mutable {
    StatusOr<scheduler::SequenceParams> params = Admit(request, arrived_at);
    if (!params.ok()) {
      outputs->push_back(Rejected(request.id, params.status()));
      return;
    }
    Status status = scheduler_->AddRequest(std::move(*params));
    if (!status.ok()) {
      requests_.erase(request.id);
      outputs->push_back(Rejected(request.id, status));
    }
  });
  cv_.notify_one();
}

void Engine::Cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back([this, id](std::vector<EngineOutput>* outputs) {
    if (scheduler_->ReleaseHeld(id).ok()) return;  // ended already; only its KV was left
    if (!scheduler_->Cancel(id).ok()) return;      // unknown or already ended
    // Report the end now, so the id can be reused at once (the router's Release-then-local path);
    // the scheduler's own record of it is swallowed at the next step.
    reported_.insert(id);
    EngineOutput out;
    out.id = id;
    out.finished = true;
    out.finish_reason = scheduler::FinishReason::kCancelled;
    out.status = CancelledError("cancelled");
    out.times = TimesOf(id);
    requests_.erase(id);
    outputs->push_back(std::move(out));
  });
  cv_.notify_one();
}

void Engine::ReleaseHeld(RequestId id) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back([this, id](std::vector<EngineOutput>*) { scheduler_->ReleaseHeld(id).IgnoreError(); });
  cv_.notify_one();
}

void Engine::Reserve(EngineRequest request, int64_t lease_ms,
                     std::function<void(StatusOr<scheduler::Reservation>)> done) {
  const Nanos arrived_at = clock_.NowNanos();
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back([this, request = std::move(request), lease_ms, arrived_at,
                     done = std::move(done)](std::vector<EngineOutput>*) mutable {
    StatusOr<scheduler::SequenceParams> params = Admit(request, arrived_at);
    if (!params.ok()) {
      done(params.status());
      return;
    }
    StatusOr<scheduler::Reservation> reservation = scheduler_->Reserve(std::move(*params), lease_ms);
    if (reservation.ok()) {
      // Promotions/demotions the reservation queued must land before any remote write.
      Status copied = storage_->ExecuteCopies(reservation->copies);
      if (!copied.ok()) {
        scheduler_->Cancel(request.id).IgnoreError();
        reported_.insert(request.id);
        reservation = copied;
      }
    }
    if (!reservation.ok()) {
      requests_.erase(request.id);
    } else {
      requests_[request.id].admitted_at = clock_.NowNanos();
    }
    done(std::move(reservation));
  });
  cv_.notify_one();
}

void Engine::CompleteReservation(RequestId id, TokenId first_token, runtime::SampledLogprobs first_token_logprobs,
                                 std::vector<runtime::SampledLogprobs> prompt_logprobs) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back([this, id, first_token, logprobs = std::move(first_token_logprobs),
                     prompt = std::move(prompt_logprobs)](std::vector<EngineOutput>* outputs) mutable {
    auto finished = scheduler_->CompleteReservation(id, first_token);
    if (!finished.ok()) {
      TANDEM_LOG_WARN("complete reservation {}: {}", id, finished.status().ToString());
      return;
    }
    EngineOutput out;
    out.id = id;
    out.tokens.push_back(first_token);
    if (auto state = requests_.find(id); state != requests_.end()) {
      state->second.first_token_at = state->second.last_token_at = clock_.NowNanos();
      state->second.remote_first_token = true;
      if (state->second.sampling.logprobs >= 0) out.logprobs.push_back(std::move(logprobs));
      if (state->second.sampling.prompt_logprobs >= 0) out.prompt_logprobs = std::move(prompt);
      out.times = TimesOf(id);
    }
    if (const scheduler::Sequence* seq = scheduler_->Find(id)) out.num_cached_tokens = seq->num_cached_prompt_tokens;
    outputs->push_back(std::move(out));
  });
  cv_.notify_one();
}

void Engine::Post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back([fn = std::move(fn)](std::vector<EngineOutput>*) { fn(); });
  cv_.notify_one();
}

void Engine::SetStepObserver(StepObserver observer) {
  Post([this, observer = std::move(observer)]() mutable { step_observer_ = std::move(observer); });
}

void Engine::Wake() { cv_.notify_one(); }

void Engine::RequestFullCacheReport() {
  cache_reports_.RequestFull();
  Post([] {});  // a step soon, even when idle, publishes it
}

scheduler::SchedulerCounters Engine::Counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void Engine::Start(OutputSink sink) {
  TANDEM_CHECK(!thread_.joinable()) << "engine already started";
  sink_ = std::move(sink);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::Loop() {
  pthread_setname_np(pthread_self(), "tandem-engine");  // for top -H and /proc/<pid>/task/*/comm
  thread_id_.store(ThisThreadId(), std::memory_order_relaxed);
  bool busy = false;
  while (true) {
    cpu_seconds_.store(ThisThreadCpuSeconds(), std::memory_order_relaxed);
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!busy) {
        // Leases and quarantines need checking even when nothing else happens.
        const bool timed = counters_.reservations_active > 0 || counters_.num_quarantined_blocks > 0;
        auto idle = timed ? std::chrono::milliseconds(20) : std::chrono::milliseconds(500);
        cv_.wait_for(lock, idle, [this] { return stop_ || !events_.empty(); });
      }
      if (stop_) return;
    }
    std::vector<EngineOutput> outputs;
    busy = StepOnce(&outputs);
    cache_reports_.Publish(cache_log_, scheduler_->kv());
    Flush(&outputs);
  }
}

void Engine::Flush(std::vector<EngineOutput>* outputs) {
  if (outputs->empty() || !sink_) return;
  sink_(std::move(*outputs));
  outputs->clear();
}

}  // namespace tandem::engine
