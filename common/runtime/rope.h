// Rotary embedding frequencies, computed once per model on the host, with
// the rope scaling of the checkpoint applied exactly as Hugging Face
// transformers does (`_compute_default_rope_parameters`, `..._linear_...`,
// `..._llama3_...`): inv_freq[i] = 1 / theta^(2i / head_dim), then
//  - linear: inv_freq / factor;
//  - llama3: wavelengths longer than original_max / low_freq_factor are
//    divided by factor, shorter than original_max / high_freq_factor are
//    kept, and the band between is interpolated smoothly.
// The backend's RopeKvWrite op applies them (rotate_half convention).
// Thread rule: pure function.
#pragma once

#include <vector>

#include "common/base/status.h"
#include "common/model/model_config.h"

namespace tandem::runtime {

// [head_dim / 2] frequencies. InvalidArgument for an odd head_dim, a
// non-positive theta, or inconsistent scaling parameters.
StatusOr<std::vector<float>> RopeInvFreq(int head_dim, double rope_theta, const model::RopeScaling& scaling);

}  // namespace tandem::runtime
