#include "common/runtime/rope.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace tandem::runtime {
namespace {

Status CheckScaling(const model::RopeScaling& s) {
  switch (s.type) {
    case model::RopeScalingType::kNone: return Status::Ok();
    case model::RopeScalingType::kLinear:
      if (!(s.factor > 0.0)) return InvalidArgumentError("rope_scaling linear: factor must be positive");
      return Status::Ok();
    case model::RopeScalingType::kLlama3:
      if (!(s.factor > 0.0) || !(s.low_freq_factor > 0.0) || !(s.high_freq_factor > s.low_freq_factor) ||
          s.original_max_position_embeddings <= 0) {
        return InvalidArgumentError(
            fmt::format("rope_scaling llama3: need factor > 0, high_freq_factor > low_freq_factor > 0 and "
                        "original_max_position_embeddings > 0 (got {}, {}, {}, {})",
                        s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_position_embeddings));
      }
      return Status::Ok();
  }
  return InvalidArgumentError("unknown rope scaling type");
}

double Llama3Scale(double inv_freq, const model::RopeScaling& s) {
  const double old_len = s.original_max_position_embeddings;
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / s.factor;  // low frequencies: scaled
  if (wavelen < high_freq_wavelen) return inv_freq;            // high frequencies: kept
  const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

}  // namespace

StatusOr<std::vector<float>> RopeInvFreq(int head_dim, double rope_theta, const model::RopeScaling& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    return InvalidArgumentError(fmt::format("rope needs an even head_dim, got {}", head_dim));
  }
  if (!(rope_theta > 0.0)) return InvalidArgumentError(fmt::format("rope_theta must be positive, got {}", rope_theta));
  TANDEM_RETURN_IF_ERROR(CheckScaling(scaling));
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) {
    // Hugging Face rounds the base frequency to fp32 before scaling.
    double f = static_cast<float>(1.0 / std::pow(rope_theta, (2.0 * i) / head_dim));
    if (scaling.type == model::RopeScalingType::kLinear) f /= scaling.factor;
    if (scaling.type == model::RopeScalingType::kLlama3) f = Llama3Scale(f, scaling);
    inv_freq[i] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace tandem::runtime
