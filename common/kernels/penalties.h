// Logit processing on the GPU around token selection (sampling.h), with the
// semantics of runtime::Sampler (common/runtime/sampling_params.h):
//  - LaunchApplyPenalties: per row, the Hugging Face repetition penalty over the
//    distinct tokens of prompt + output, the OpenAI presence / frequency
//    penalties over output-token counts, the OpenAI logit_bias, and -inf for
//    the stop ids that min_tokens masks. Input is a sparse list per row built
//    on the host (only the rows that need it), so the work is proportional to
//    the tokens listed, not to the vocabulary. The arithmetic is IEEE single precision without
//    contraction, so it equals the host's bit for bit.
//  - LaunchSanitizeLogits: NaN -> -inf over whole rows (the sampler's threshold
//    searches order by bit pattern and would rank NaN above every logit).
//  - LaunchRejectMaskedTokens: after argmax or sampling, a row whose chosen
//    token has logit -inf or NaN had no token left: its token becomes -1. (Both
//    selection kernels pick a finite logit whenever the row has one.)
// Thread rule: launchers only queue work on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/base/status.h"

namespace tandem::kernels {

// One token of a row's penalty list. Tokens are distinct within a row and in [0, vocab).
struct PenaltyEntry {
  int32_t token = 0;
  int32_t output_count = 0;  // times the token occurs in the output so far (>= 0)
  uint32_t flags = 0;        // kPenaltyInPrompt | kPenaltyMask
  float bias = 0.f;          // logit_bias, added after the penalties (0 = none)
};
inline constexpr uint32_t kPenaltyInPrompt = 1u;  // the token occurs in the prompt
inline constexpr uint32_t kPenaltyMask = 2u;      // a stop id masked by min_tokens: logit -> -inf

static_assert(sizeof(PenaltyEntry) == 16, "PenaltyEntry is copied byte for byte from the host");

// One row that has a penalty list.
struct PenaltyRow {
  int32_t row = 0;          // row index into the logits
  int32_t entry_begin = 0;  // its entries: [entry_begin, entry_begin + num_entries)
  int32_t num_entries = 0;
  float repetition_penalty = 1.f;  // 1 = off; applied to tokens in the prompt or the output
  float presence_penalty = 0.f;    // applied to tokens with output_count > 0
  float frequency_penalty = 0.f;   // times output_count
};

static_assert(sizeof(PenaltyRow) == 24, "PenaltyRow is copied byte for byte from the host");

struct PenaltyParams {
  float* logits = nullptr;    // [num_logits_rows, logits_stride], updated in place
  int64_t logits_stride = 0;  // >= vocab
  int num_logits_rows = 0;
  int vocab = 0;
  const PenaltyRow* rows = nullptr;       // [num_rows], device memory; rows[i].row distinct
  int num_rows = 0;                       // rows with a list (one thread block each)
  const PenaltyEntry* entries = nullptr;  // device memory, indexed by PenaltyRow::entry_begin
};

// Per entry, in this order: NaN -> -inf; repetition penalty (logit > 0 ? logit / p :
// logit * p) if in the prompt or the output; logit -= frequency * count + presence if
// count > 0; += bias; -inf if masked. The caller validates the lists (distinct tokens in range,
// row indices in range): the kernel does not check them.
// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchApplyPenalties(const PenaltyParams& params, cudaStream_t stream);

struct SanitizeLogitsParams {
  float* logits = nullptr;  // [num_rows, logits_stride], NaN -> -inf in place
  int64_t logits_stride = 0;
  int num_rows = 0;
  int vocab = 0;
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchSanitizeLogits(const SanitizeLogitsParams& params, cudaStream_t stream);

struct RejectMaskedParams {
  const float* logits = nullptr;  // [num_rows, logits_stride], as the selection kernel saw them
  int64_t logits_stride = 0;
  int32_t* tokens = nullptr;  // [num_rows] chosen tokens; -1 where the row had none
  int num_rows = 0;
  int vocab = 0;
};

// Errors: InvalidArgument on null pointers or bad sizes; Internal on a launch failure.
Status LaunchRejectMaskedTokens(const RejectMaskedParams& params, cudaStream_t stream);

}  // namespace tandem::kernels
