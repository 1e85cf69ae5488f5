#include "planner/profile.h"

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "planner/statistics.h"

namespace tandem::planner {
namespace {

Status Bad(const std::string& field, const std::string& problem) {
  return InvalidArgumentError("profile: " + field + " " + problem);
}

Status Positive(const std::string& field, double value) {
  if (!std::isfinite(value) || value <= 0) return Bad(field, "must be a positive number");
  return Status::Ok();
}

Status NonNegative(const std::string& field, double value) {
  if (!std::isfinite(value) || value < 0) return Bad(field, "must be a number >= 0");
  return Status::Ok();
}

Status NotEmpty(const std::string& field, const std::string& value) {
  if (value.empty()) return Bad(field, "must not be empty");
  return Status::Ok();
}

// The error figures every fit carries.
Status CheckFitError(const std::string& at, double r2, double max_relative, double mean_relative) {
  if (!std::isfinite(r2) || r2 > 1) return Bad(at + ".r2", "must be a number <= 1");
  TANDEM_RETURN_IF_ERROR(NonNegative(at + ".max_relative_error", max_relative));
  TANDEM_RETURN_IF_ERROR(NonNegative(at + ".mean_relative_error", mean_relative));
  if (mean_relative > max_relative) return Bad(at + ".mean_relative_error", "is above max_relative_error");
  return Status::Ok();
}

Status ValidateHeader(const Profile& p) {
  if (p.format_version != kProfileFormatVersion) {
    return Bad("format_version", std::to_string(p.format_version) + " is not the version this build reads (" +
                                     std::to_string(kProfileFormatVersion) + ")");
  }
  TANDEM_RETURN_IF_ERROR(NotEmpty("commit", p.commit));
  TANDEM_RETURN_IF_ERROR(NotEmpty("date", p.date));
  if (p.device.backend != "cpu" && p.device.backend != "cuda") return Bad("device.backend", "must be cpu or cuda");
  if (p.device.ordinal < 0) return Bad("device.ordinal", "must be >= 0");
  TANDEM_RETURN_IF_ERROR(NotEmpty("device.name", p.device.name));
  TANDEM_RETURN_IF_ERROR(NotEmpty("model.id", p.model.id));
  TANDEM_RETURN_IF_ERROR(NotEmpty("model.kv_dtype", p.model.kv_dtype));
  const std::pair<const char*, int> shape[] = {{"model.num_layers", p.model.num_layers},
                                               {"model.hidden_size", p.model.hidden_size},
                                               {"model.intermediate_size", p.model.intermediate_size},
                                               {"model.num_heads", p.model.num_heads},
                                               {"model.num_kv_heads", p.model.num_kv_heads},
                                               {"model.head_dim", p.model.head_dim},
                                               {"model.vocab_size", p.model.vocab_size},
                                               {"model.max_position_embeddings", p.model.max_position_embeddings},
                                               {"engine.block_size", p.engine.block_size},
                                               {"engine.num_device_blocks", p.engine.num_device_blocks},
                                               {"engine.max_num_batched_tokens", p.engine.max_num_batched_tokens},
                                               {"engine.max_num_seqs", p.engine.max_num_seqs},
                                               {"engine.max_prefill_chunk_tokens", p.engine.max_prefill_chunk_tokens},
                                               {"engine.max_model_len", p.engine.max_model_len}};
  for (const auto& [field, value] : shape) TANDEM_RETURN_IF_ERROR(Positive(field, value));
  if (p.engine.num_host_blocks < 0) return Bad("engine.num_host_blocks", "must be >= 0");
  const KvCapacity& kv = p.kv_capacity;
  TANDEM_RETURN_IF_ERROR(Positive("kv_capacity.bytes_per_token", static_cast<double>(kv.bytes_per_token)));
  if (kv.device_tokens != int64_t{p.engine.num_device_blocks} * p.engine.block_size) {
    return Bad("kv_capacity.device_tokens", "is not engine.num_device_blocks × engine.block_size");
  }
  if (kv.host_tokens != int64_t{p.engine.num_host_blocks} * p.engine.block_size) {
    return Bad("kv_capacity.host_tokens", "is not engine.num_host_blocks × engine.block_size");
  }
  return Status::Ok();
}

Status ValidatePrefill(const PrefillProfile& prefill) {
  if (prefill.repetitions < 1) return Bad("prefill.repetitions", "must be >= 1");
  if (prefill.points.empty()) return Bad("prefill.points", "must not be empty");
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < prefill.points.size(); ++i) {
    const PrefillPoint& p = prefill.points[i];
    const std::string at = "prefill.points[" + std::to_string(i) + "]";
    TANDEM_RETURN_IF_ERROR(Positive(at + ".prompt_tokens", p.prompt_tokens));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".requests", p.requests));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".steps", p.steps));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".seconds", p.seconds));
    TANDEM_RETURN_IF_ERROR(NonNegative(at + ".spread", p.spread));
    if (!seen.insert({p.requests, p.prompt_tokens}).second) {
      return Bad(at, "repeats the shape (prompt_tokens, requests) of an earlier point");
    }
  }
  return Status::Ok();
}

Status ValidateDecode(const DecodeProfile& decode) {
  if (decode.timed_steps < 1) return Bad("decode.timed_steps", "must be >= 1");
  if (decode.repetitions < 1) return Bad("decode.repetitions", "must be >= 1");
  if (decode.points.size() < 3) return Bad("decode.points", "must hold at least 3 points (the fit has 3 terms)");
  for (size_t i = 0; i < decode.points.size(); ++i) {
    const DecodePoint& p = decode.points[i];
    const std::string at = "decode.points[" + std::to_string(i) + "]";
    TANDEM_RETURN_IF_ERROR(Positive(at + ".batch", p.batch));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".context_tokens", p.context_tokens));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".kv_tokens", p.kv_tokens));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".step_seconds", p.step_seconds));
    TANDEM_RETURN_IF_ERROR(NonNegative(at + ".spread", p.spread));
  }
  const DecodeFit& f = decode.fit;
  TANDEM_RETURN_IF_ERROR(NonNegative("decode.fit.intercept_seconds", f.intercept_seconds));
  TANDEM_RETURN_IF_ERROR(NonNegative("decode.fit.per_sequence_seconds", f.per_sequence_seconds));
  TANDEM_RETURN_IF_ERROR(NonNegative("decode.fit.per_kv_token_seconds", f.per_kv_token_seconds));
  if (f.StepSeconds(1, 1) <= 0) return Bad("decode.fit", "predicts no time for a step");
  return CheckFitError("decode.fit", f.r2, f.max_relative_error, f.mean_relative_error);
}

Status ValidateTransfer(const TransferProfile& transfer) {
  std::set<std::string> seen;
  for (size_t i = 0; i < transfer.paths.size(); ++i) {
    const TransferPath& path = transfer.paths[i];
    const std::string at = "transfer.paths[" + std::to_string(i) + "]";
    TANDEM_RETURN_IF_ERROR(NotEmpty(at + ".transport", path.transport));
    TANDEM_RETURN_IF_ERROR(NotEmpty(at + ".memory", path.memory));
    if (!seen.insert(path.transport + "|" + path.options + "|" + path.memory).second) {
      return Bad(at, "repeats an earlier path (transport, options, memory)");
    }
    if (path.points.size() < 3) return Bad(at + ".points", "must hold at least 3 points (the fit has 3 terms)");
    for (size_t j = 0; j < path.points.size(); ++j) {
      const TransferPoint& p = path.points[j];
      const std::string pt = at + ".points[" + std::to_string(j) + "]";
      TANDEM_RETURN_IF_ERROR(Positive(pt + ".blocks", p.blocks));
      TANDEM_RETURN_IF_ERROR(Positive(pt + ".runs", p.runs));
      TANDEM_RETURN_IF_ERROR(Positive(pt + ".bytes", static_cast<double>(p.bytes)));
      TANDEM_RETURN_IF_ERROR(Positive(pt + ".seconds", p.seconds));
    }
    TANDEM_RETURN_IF_ERROR(NonNegative(at + ".fit.fixed_seconds", path.fit.fixed_seconds));
    TANDEM_RETURN_IF_ERROR(NonNegative(at + ".fit.per_run_seconds", path.fit.per_run_seconds));
    TANDEM_RETURN_IF_ERROR(Positive(at + ".fit.bytes_per_second", path.fit.bytes_per_second));
    TANDEM_RETURN_IF_ERROR(
        CheckFitError(at + ".fit", path.fit.r2, path.fit.max_relative_error, path.fit.mean_relative_error));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateProfile(const Profile& profile) {
  TANDEM_RETURN_IF_ERROR(ValidateHeader(profile));
  TANDEM_RETURN_IF_ERROR(ValidatePrefill(profile.prefill));
  TANDEM_RETURN_IF_ERROR(ValidateDecode(profile.decode));
  return ValidateTransfer(profile.transfer);
}

ProfileSpread MeasurementSpread(const Profile& profile) {
  ProfileSpread out;
  std::vector<double> spreads;
  auto add = [&](int repetitions, double spread, const std::string& where) {
    if (repetitions < 2) return;
    spreads.push_back(spread);
    if (spread > out.max || spreads.size() == 1) {
      out.max = spread;
      out.where = where;
    }
  };
  for (const PrefillPoint& p : profile.prefill.points) {
    add(profile.prefill.repetitions, p.spread,
        "prefill " + std::to_string(p.requests) + " × " + std::to_string(p.prompt_tokens));
  }
  for (const DecodePoint& p : profile.decode.points) {
    add(profile.decode.repetitions, p.spread,
        "decode " + std::to_string(p.batch) + " at " + std::to_string(p.context_tokens));
  }
  out.points = static_cast<int>(spreads.size());
  out.median = Median(std::move(spreads));
  return out;
}

std::string NoisyProfileWarning(const Profile& profile) {
  const ProfileSpread spread = MeasurementSpread(profile);
  if (spread.median <= kNoisyProfileSpread) return "";
  auto percent = [](double x) { return std::to_string(static_cast<int>(100 * x + 0.5)) + " %"; };
  return "the repetitions of half its " + std::to_string(spread.points) + " points disagreed by more than " +
         percent(spread.median) + " (up to " + percent(spread.max) + ", " + spread.where +
         "): the host's speed moved while it was profiled, and no prediction from it is closer than that; "
         "measure again on a quiet host";
}

}  // namespace tandem::planner
