#include "tools/profile/engine_probe.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "planner/linear_fit.h"
#include "planner/statistics.h"

namespace tandem::tools {
namespace {

// A run that takes more steps than this is stuck (a scheduler that cannot admit).
constexpr int kMaxStepsPerRun = 100000;

using planner::Median;

// (slowest − fastest) / median of one point's repetitions.
double Spread(const std::vector<double>& values) {
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return (*high - *low) / Median(values);
}

// Points by requests, then prompt tokens; an empty grid is an error.
StatusOr<planner::PrefillProfile> Finalize(planner::PrefillProfile profile) {
  if (profile.points.empty()) return FailedPreconditionError("prefill: no point of the grid fits this engine");
  std::stable_sort(profile.points.begin(), profile.points.end(),
                   [](const auto& a, const auto& b) { return a.requests < b.requests; });
  return profile;
}

}  // namespace

EngineProbe::EngineProbe(engine::Engine& engine, const ProfileOptions& options)
    : engine_(engine), options_(options), rng_(static_cast<uint32_t>(options.seed)) {
  engine_.SetStepObserver([this](const scheduler::SchedulerOutput& step) {
    last_step_.batch = static_cast<int>(step.scheduled.size());
    last_step_.decode_only = true;
    for (const scheduler::ScheduledSequence& s : step.scheduled) {
      last_step_.kv_tokens += s.start_position + s.num_new_tokens;
      last_step_.decode_only = last_step_.decode_only && !s.is_prefill;
    }
  });
}

int64_t EngineProbe::PoolTokens() const {
  return int64_t{engine_.device_kv().layout().num_blocks} * engine_.config().block_size;
}

int64_t EngineProbe::BlockTokens(int64_t tokens) const {
  const int64_t block = engine_.config().block_size;
  return (tokens + block - 1) / block * block;
}

std::vector<RequestId> EngineProbe::Submit(int count, int prompt_tokens, int max_tokens) {
  std::uniform_int_distribution<TokenId> token(0, engine_.model_config().vocab_size - 1);
  std::vector<RequestId> ids;
  for (int i = 0; i < count; ++i) {
    engine::EngineRequest r;
    r.id = next_id_++;
    r.tenant_salt = "profile-" + std::to_string(r.id);  // no prefix cache hits across requests
    r.prompt_tokens.resize(prompt_tokens);
    for (TokenId& t : r.prompt_tokens) t = token(rng_);
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    live_.insert(r.id);
    ids.push_back(r.id);
    engine_.Submit(std::move(r));
  }
  return ids;
}

StatusOr<double> EngineProbe::Step(std::vector<engine::EngineOutput>* outputs) {
  last_step_ = StepShape{};
  const auto start = std::chrono::steady_clock::now();
  engine_.StepOnce(outputs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const engine::EngineOutput& out : *outputs) {
    if (!out.finished) continue;
    live_.erase(out.id);
    if (!out.status.ok() && cancelled_.erase(out.id) == 0) {
      return out.status.WithContext("request " + std::to_string(out.id) + " of the profile");
    }
  }
  return seconds;
}

Status EngineProbe::StepUntilFirstTokens(const std::vector<RequestId>& ids, double* seconds, int* steps) {
  std::set<RequestId> waiting(ids.begin(), ids.end());
  for (int i = 0; i < kMaxStepsPerRun && !waiting.empty(); ++i) {
    std::vector<engine::EngineOutput> outputs;
    TANDEM_ASSIGN_OR_RETURN(double step_seconds, Step(&outputs));
    if (seconds != nullptr) *seconds += step_seconds;
    if (steps != nullptr) ++*steps;
    for (const engine::EngineOutput& out : outputs) {
      if (!out.tokens.empty()) waiting.erase(out.id);
    }
  }
  if (!waiting.empty()) return InternalError("the engine did not prefill the profile's requests");
  return Status::Ok();
}

Status EngineProbe::Finish(const std::vector<RequestId>& ids) {
  for (RequestId id : ids) {
    if (live_.count(id) == 0) continue;
    cancelled_.insert(id);
    engine_.Cancel(id);
  }
  auto any_live = [&] { return std::any_of(ids.begin(), ids.end(), [&](RequestId id) { return live_.count(id); }); };
  for (int i = 0; i < kMaxStepsPerRun && any_live(); ++i) {
    std::vector<engine::EngineOutput> outputs;
    TANDEM_RETURN_IF_ERROR(Step(&outputs).status());
  }
  if (any_live()) return InternalError("the engine did not end the profile's requests");
  cancelled_.clear();
  return Status::Ok();
}

StatusOr<planner::PrefillPoint> EngineProbe::PrefillOnce(int prompt_tokens, int requests) {
  planner::PrefillPoint point{.prompt_tokens = prompt_tokens, .requests = requests};
  const std::vector<RequestId> ids = Submit(requests, prompt_tokens, /*max_tokens=*/1);
  TANDEM_RETURN_IF_ERROR(StepUntilFirstTokens(ids, &point.seconds, &point.steps));
  TANDEM_RETURN_IF_ERROR(Finish(ids));
  return point;
}

StatusOr<planner::PrefillProfile> EngineProbe::MeasurePrefill() {
  const engine::EngineConfig& config = engine_.config();
  const int max_len = config.scheduler.max_model_len, budget = config.scheduler.max_num_batched_tokens;
  planner::PrefillProfile profile;
  profile.repetitions = options_.prefill_repetitions;
  std::vector<planner::PrefillPoint> shapes;
  for (int tokens = options_.prefill_min_tokens; tokens <= options_.prefill_max_tokens; tokens *= 2) {
    if (tokens + 1 > max_len) {
      profile.capped.push_back("prompt_tokens " + std::to_string(tokens) + " and longer: over max_model_len " +
                               std::to_string(max_len));
      break;
    }
    bool pool_full = false;
    for (int requests = 1; requests <= options_.prefill_max_requests; requests *= 2) {
      // More than one request only where they share one step's token budget.
      if (requests > 1 && (requests * tokens > budget || requests > config.scheduler.max_num_seqs)) break;
      if (requests * (BlockTokens(tokens + 1) + config.block_size) > PoolTokens()) {
        profile.capped.push_back(std::to_string(requests) + " × " + std::to_string(tokens) +
                                 " prompt tokens and more: over the device KV pool of " + std::to_string(PoolTokens()) +
                                 " tokens");
        pool_full = requests == 1;
        break;
      }
      shapes.push_back({.prompt_tokens = tokens, .requests = requests});
    }
    if (pool_full) break;
  }
  // A warm-up round, then the timed rounds: each walks the whole grid.
  std::vector<std::vector<double>> seconds(shapes.size());
  for (int round = 0; round <= options_.prefill_repetitions; ++round) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      TANDEM_ASSIGN_OR_RETURN(planner::PrefillPoint point, PrefillOnce(shapes[i].prompt_tokens, shapes[i].requests));
      if (round == 0) continue;
      shapes[i].steps = point.steps;
      seconds[i].push_back(point.seconds);
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    shapes[i].seconds = Median(seconds[i]);
    shapes[i].spread = Spread(seconds[i]);
    profile.points.push_back(shapes[i]);
  }
  return Finalize(std::move(profile));
}

int EngineProbe::DecodeMaxTokens(int batch, int context_tokens) const {
  // The first sequences to be prefilled decode while the others still prefill:
  // they must not reach max_tokens before the last timed step.
  const scheduler::SchedulerConfig& s = engine_.config().scheduler;
  const int prefill_steps = (batch * context_tokens + s.max_num_batched_tokens - 1) / s.max_num_batched_tokens +
                            (context_tokens + s.max_prefill_chunk_tokens - 1) / s.max_prefill_chunk_tokens + 1;
  return prefill_steps + options_.decode_warmup_steps + options_.decode_steps + 1;
}

StatusOr<planner::DecodePoint> EngineProbe::DecodePoint(int batch, int context_tokens) {
  const int steps = options_.decode_warmup_steps + options_.decode_steps;
  const std::vector<RequestId> ids = Submit(batch, context_tokens, DecodeMaxTokens(batch, context_tokens));
  TANDEM_RETURN_IF_ERROR(StepUntilFirstTokens(ids, nullptr, nullptr));
  std::vector<double> seconds;
  double kv_tokens = 0;
  for (int i = 0; i < steps; ++i) {
    std::vector<engine::EngineOutput> outputs;
    TANDEM_ASSIGN_OR_RETURN(double step_seconds, Step(&outputs));
    if (!last_step_.decode_only || last_step_.batch != batch) {
      return InternalError("decode batch " + std::to_string(batch) + " at context " + std::to_string(context_tokens) +
                           ": a step ran " + std::to_string(last_step_.batch) +
                           " sequences or prefill work (preempted? give the engine more KV blocks)");
    }
    if (i < options_.decode_warmup_steps) continue;
    seconds.push_back(step_seconds);
    kv_tokens += static_cast<double>(last_step_.kv_tokens) / options_.decode_steps;
  }
  TANDEM_RETURN_IF_ERROR(Finish(ids));
  return planner::DecodePoint{
      .batch = batch, .context_tokens = context_tokens, .kv_tokens = kv_tokens, .step_seconds = Median(seconds)};
}

StatusOr<planner::DecodeProfile> EngineProbe::MeasureDecode() {
  const engine::EngineConfig& config = engine_.config();
  const int max_batch =
      std::min({options_.decode_max_batch, config.scheduler.max_num_seqs, config.scheduler.max_num_batched_tokens});
  planner::DecodeProfile profile;
  profile.timed_steps = options_.decode_steps;
  profile.repetitions = options_.decode_repetitions;
  std::vector<std::pair<int, int>> shapes;  // (batch, context)
  for (int context = options_.decode_min_context; context <= options_.decode_max_context; context *= 4) {
    if (context + DecodeMaxTokens(1, context) > config.scheduler.max_model_len) {
      profile.capped.push_back("context " + std::to_string(context) + " and longer: over max_model_len " +
                               std::to_string(config.scheduler.max_model_len));
      break;
    }
    for (int batch = 1; batch <= max_batch; batch *= 2) {
      const int64_t kv = int64_t{batch} * context;
      if (options_.decode_max_kv_tokens > 0 && kv > options_.decode_max_kv_tokens) {
        profile.capped.push_back("batch " + std::to_string(batch) + " and larger at context " +
                                 std::to_string(context) + ": over decode.max_kv_tokens");
        break;
      }
      if (batch * (BlockTokens(context + DecodeMaxTokens(batch, context)) + config.block_size) > PoolTokens()) {
        profile.capped.push_back("batch " + std::to_string(batch) + " and larger at context " +
                                 std::to_string(context) + ": over the device KV pool of " +
                                 std::to_string(PoolTokens()) + " tokens");
        break;
      }
      shapes.emplace_back(batch, context);
    }
  }
  // Rounds over the whole grid, as prefill's (each point has its own warm-up steps).
  std::vector<std::vector<double>> seconds(shapes.size());
  for (int round = 0; round < options_.decode_repetitions; ++round) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      TANDEM_ASSIGN_OR_RETURN(planner::DecodePoint point, DecodePoint(shapes[i].first, shapes[i].second));
      if (round == 0) profile.points.push_back(point);
      seconds[i].push_back(point.step_seconds);
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    profile.points[i].step_seconds = Median(seconds[i]);
    profile.points[i].spread = Spread(seconds[i]);
  }
  std::vector<std::vector<double>> rows;
  std::vector<double> step_seconds;
  for (const planner::DecodePoint& p : profile.points) {
    rows.push_back({1.0, static_cast<double>(p.batch), p.kv_tokens});
    step_seconds.push_back(p.step_seconds);
  }
  StatusOr<planner::LinearFit> fit = planner::FitLeastSquares(rows, step_seconds, {.non_negative = true});
  if (!fit.ok())
    return fit.status().WithContext("decode: the step-time fit over " + std::to_string(rows.size()) + " points");
  profile.fit = planner::DecodeFit{.intercept_seconds = fit->coefficients[0],
                                   .per_sequence_seconds = fit->coefficients[1],
                                   .per_kv_token_seconds = fit->coefficients[2],
                                   .r2 = fit->r2,
                                   .max_relative_error = fit->max_relative_error,
                                   .mean_relative_error = fit->mean_relative_error};
  return profile;
}

}  // namespace tandem::tools
