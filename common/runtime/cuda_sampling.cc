// CudaBackend::SampleTokens: token selection without the logits leaving the GPU.
//
// Per call, on the backend's stream:
//   1. one host->device copy of everything the kernels read (per-row sampler
//      parameters when a row samples, penalty lists when a row has penalties),
//      staged in pinned memory;
//   2. LaunchApplyPenalties over the rows with a list (repetition over prompt +
//      output, presence / frequency over output counts, logit_bias, min_tokens masks);
//   3. LaunchApplyTokenMask over the rows with a structured-output mask (-inf for the
//      tokens the grammar does not allow; the masks go up in the same copy);
//   4. all rows greedy: LaunchArgmax; otherwise LaunchSanitizeLogits (NaN ->
//      -inf, as the host sampler does) and LaunchSampling;
//   5. LaunchRejectMaskedTokens (-1 for a row whose pick is -inf or NaN);
//   6. when a row asks for logprobs, LaunchLogprobs over the same logits: the
//      token's logprob and the top ones, (1 + max top) entries per row;
//   7. one device->host copy of one int32 per row (and those entries).
// Penalty lists are rebuilt from the request's tokens each step: host work is
// O(prompt + output) per row with penalties, none for the other rows.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/cuda/cuda_status.h"
#include "common/cuda/device_buffer.h"
#include "common/kernels/logprobs.h"
#include "common/kernels/penalties.h"
#include "common/kernels/sampling.h"
#include "common/kernels/token_mask.h"
#include "common/runtime/cuda_backend.h"

namespace tandem::runtime {
namespace {

constexpr size_t kAlign = 16;
constexpr size_t kMinStagingBytes = 64 << 10;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of one call's arrays, the same in pinned staging and on the device.
// [0, upload_bytes) goes up; the tokens come back at `tokens`.
struct SamplingLayout {
  size_t temperature = 0, top_k = 0, top_p = 0, min_p = 0, seeds = 0, offsets = 0;
  size_t penalty_rows = 0, entries = 0, mask_rows = 0, masks = 0, num_top = 0, upload_bytes = 0, tokens = 0,
         logprobs = 0, total_bytes = 0;
};

// `max_top` < 0: no row wants logprobs.
SamplingLayout MakeLayout(size_t rows, bool sampled, size_t num_penalty_rows, size_t num_entries,
                          size_t num_mask_rows, size_t mask_words, int max_top) {
  SamplingLayout l;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = AlignUp(at + bytes);
    return offset;
  };
  if (sampled) {
    l.temperature = take(rows * sizeof(float));
    l.top_k = take(rows * sizeof(int32_t));
    l.top_p = take(rows * sizeof(float));
    l.min_p = take(rows * sizeof(float));
    l.seeds = take(rows * sizeof(uint64_t));
    l.offsets = take(rows * sizeof(uint64_t));
  }
  l.penalty_rows = take(num_penalty_rows * sizeof(kernels::PenaltyRow));
  l.entries = take(num_entries * sizeof(kernels::PenaltyEntry));
  l.mask_rows = take(num_mask_rows * sizeof(int32_t));
  l.masks = take(num_mask_rows * mask_words * sizeof(uint32_t));
  if (max_top >= 0) l.num_top = take(rows * sizeof(int32_t));
  l.upload_bytes = at;
  l.tokens = take(rows * sizeof(int32_t));
  if (max_top >= 0) l.logprobs = take(rows * (1 + max_top) * sizeof(kernels::LogprobEntry));
  l.total_bytes = at;
  return l;
}

}  // namespace

struct CudaBackend::SamplingState {
  cuda::PinnedBuffer staging;  // the upload image, then the tokens coming back
  cuda::DeviceBuffer device;   // the same layout on the GPU
  std::vector<kernels::PenaltyRow> penalty_rows;
  std::vector<kernels::PenaltyEntry> entries;
  std::vector<int32_t> slot;  // [vocab]: entry index of a token in the row being built, else -1
  std::vector<int32_t> mask_rows;  // rows with a structured-output mask
  SamplingLayout layout;      // of the current call
  bool sampled = false;       // the current call has a row with temperature > 0
  int max_top = -1;           // the most top logprobs a row of the current call wants; -1: none

  // Grows both buffers to at least `bytes`. Safe: the previous call waited for its copies.
  Status Reserve(size_t bytes);
  // Appends the penalty list of logits row `row` (nothing when it needs none).
  void AddPenaltyList(int row, const SampleRequest& r, int vocab);
  // Builds the call's lists and layout and fills the staging area.
  Status Stage(std::span<const SampleRequest> requests, int vocab);
  // Queues the upload, the kernels over `logits` [rows, vocab] and the tokens' download.
  Status Launch(float* logits, int rows, int vocab, cudaStream_t stream);
  const int32_t* host_tokens() const { return reinterpret_cast<const int32_t*>(staging.as<char>() + layout.tokens); }
  const kernels::LogprobEntry* host_logprobs() const {
    return reinterpret_cast<const kernels::LogprobEntry*>(staging.as<char>() + layout.logprobs);
  }
};

void CudaBackend::SamplingStateDeleter::operator()(SamplingState* state) const { delete state; }

Status CudaBackend::SamplingState::Reserve(size_t bytes) {
  if (staging.size_bytes() >= bytes && device.size_bytes() >= bytes) return Status::Ok();
  const size_t size = std::max({bytes, 2 * staging.size_bytes(), kMinStagingBytes});
  staging = cuda::PinnedBuffer();
  device = cuda::DeviceBuffer();
  TANDEM_ASSIGN_OR_RETURN(staging, cuda::PinnedBuffer::Allocate(size));
  TANDEM_ASSIGN_OR_RETURN(device, cuda::DeviceBuffer::Allocate(size));
  return Status::Ok();
}

void CudaBackend::SamplingState::AddPenaltyList(int row, const SampleRequest& r, int vocab) {
  const SamplingParams& p = *r.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  const bool mask = static_cast<int64_t>(r.output_tokens.size()) < p.min_tokens;
  if (!repetition && !additive && !mask && p.logit_bias.empty()) return;
  if (slot.size() != static_cast<size_t>(vocab)) slot.assign(vocab, -1);
  const size_t begin = entries.size();
  // The entry of token t (created on first use), or -1 for an id outside the vocabulary.
  auto entry = [&](TokenId t) -> int64_t {
    if (t < 0 || t >= vocab) return -1;
    if (slot[t] < 0) {
      slot[t] = static_cast<int32_t>(entries.size() - begin);
      entries.push_back(kernels::PenaltyEntry{t, 0, 0, 0.f});
    }
    return static_cast<int64_t>(begin) + slot[t];
  };
  if (repetition) {
    for (TokenId t : r.prompt_tokens) {
      if (int64_t e = entry(t); e >= 0) entries[e].flags |= kernels::kPenaltyInPrompt;
    }
  }
  if (repetition || additive) {
    for (TokenId t : r.output_tokens) {
      if (int64_t e = entry(t); e >= 0) ++entries[e].output_count;
    }
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (int64_t e = entry(t); e >= 0) entries[e].bias = bias;
  }
  if (mask) {
    auto mask_ids = [&](std::span<const TokenId> ids) {
      for (TokenId t : ids) {
        if (int64_t e = entry(t); e >= 0) entries[e].flags |= kernels::kPenaltyMask;
      }
    };
    if (!p.ignore_eos) mask_ids(r.eos_token_ids);
    mask_ids(p.stop_token_ids);
  }
  for (size_t i = begin; i < entries.size(); ++i) slot[entries[i].token] = -1;
  if (entries.size() == begin) return;
  penalty_rows.push_back(kernels::PenaltyRow{row, static_cast<int32_t>(begin),
                                             static_cast<int32_t>(entries.size() - begin), p.repetition_penalty,
                                             p.presence_penalty, p.frequency_penalty});
}

Status CudaBackend::SamplingState::Stage(std::span<const SampleRequest> requests, int vocab) {
  const int rows = static_cast<int>(requests.size());
  penalty_rows.clear();
  entries.clear();
  mask_rows.clear();
  sampled = false;
  max_top = -1;
  for (int i = 0; i < rows; ++i) {
    sampled |= requests[i].params->temperature != 0.0f;
    max_top = std::max(max_top, std::min(requests[i].params->logprobs, vocab));
    AddPenaltyList(i, requests[i], vocab);
    if (!requests[i].allowed_tokens.empty()) mask_rows.push_back(i);
  }
  const size_t mask_words = (static_cast<size_t>(vocab) + 31) / 32;
  if (entries.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgumentError("SampleTokens: penalty lists too long");
  }
  layout = MakeLayout(rows, sampled, penalty_rows.size(), entries.size(), mask_rows.size(), mask_words, max_top);
  TANDEM_RETURN_IF_ERROR(Reserve(layout.total_bytes));
  char* host = staging.as<char>();
  if (sampled) {
    for (int i = 0; i < rows; ++i) {
      const SamplingParams& p = *requests[i].params;
      reinterpret_cast<float*>(host + layout.temperature)[i] = p.temperature;
      reinterpret_cast<int32_t*>(host + layout.top_k)[i] = p.top_k;
      reinterpret_cast<float*>(host + layout.top_p)[i] = p.top_p;
      reinterpret_cast<float*>(host + layout.min_p)[i] = p.min_p;
      reinterpret_cast<uint64_t*>(host + layout.seeds)[i] = requests[i].seed;
      reinterpret_cast<uint64_t*>(host + layout.offsets)[i] = requests[i].output_tokens.size();
    }
  }
  if (!penalty_rows.empty()) {
    std::memcpy(host + layout.penalty_rows, penalty_rows.data(), penalty_rows.size() * sizeof(kernels::PenaltyRow));
    std::memcpy(host + layout.entries, entries.data(), entries.size() * sizeof(kernels::PenaltyEntry));
  }
  if (!mask_rows.empty()) {
    std::memcpy(host + layout.mask_rows, mask_rows.data(), mask_rows.size() * sizeof(int32_t));
    for (size_t m = 0; m < mask_rows.size(); ++m) {
      std::memcpy(host + layout.masks + m * mask_words * sizeof(uint32_t), requests[mask_rows[m]].allowed_tokens.data(),
                  mask_words * sizeof(uint32_t));
    }
  }
  if (max_top >= 0) {
    for (int i = 0; i < rows; ++i) {
      reinterpret_cast<int32_t*>(host + layout.num_top)[i] = std::min(requests[i].params->logprobs, vocab);
    }
  }
  return Status::Ok();
}

Status CudaBackend::SamplingState::Launch(float* logits, int rows, int vocab, cudaStream_t stream) {
  const SamplingLayout& l = layout;
  char* host = staging.as<char>();
  char* dev = device.as<char>();
  if (l.upload_bytes > 0) {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dev, host, l.upload_bytes, cudaMemcpyHostToDevice, stream));
  }
  int32_t* tokens = reinterpret_cast<int32_t*>(dev + l.tokens);
  if (!penalty_rows.empty()) {
    kernels::PenaltyParams pp;
    pp.logits = logits;
    pp.logits_stride = vocab;
    pp.num_logits_rows = rows;
    pp.vocab = vocab;
    pp.rows = reinterpret_cast<const kernels::PenaltyRow*>(dev + l.penalty_rows);
    pp.num_rows = static_cast<int>(penalty_rows.size());
    pp.entries = reinterpret_cast<const kernels::PenaltyEntry*>(dev + l.entries);
    TANDEM_RETURN_IF_ERROR(kernels::LaunchApplyPenalties(pp, stream));
  }
  if (!mask_rows.empty()) {
    kernels::TokenMaskParams mp;
    mp.logits = logits;
    mp.logits_stride = vocab;
    mp.num_logits_rows = rows;
    mp.vocab = vocab;
    mp.rows = reinterpret_cast<const int32_t*>(dev + l.mask_rows);
    mp.masks = reinterpret_cast<const uint32_t*>(dev + l.masks);
    mp.num_rows = static_cast<int>(mask_rows.size());
    mp.mask_words = (vocab + 31) / 32;
    TANDEM_RETURN_IF_ERROR(kernels::LaunchApplyTokenMask(mp, stream));
  }
  if (sampled) {
    TANDEM_RETURN_IF_ERROR(kernels::LaunchSanitizeLogits({logits, vocab, rows, vocab}, stream));
    kernels::SamplingParams sp;
    sp.logits = logits;
    sp.logits_stride = vocab;
    sp.out_tokens = tokens;
    sp.temperature = reinterpret_cast<const float*>(dev + l.temperature);
    sp.top_k = reinterpret_cast<const int32_t*>(dev + l.top_k);
    sp.top_p = reinterpret_cast<const float*>(dev + l.top_p);
    sp.min_p = reinterpret_cast<const float*>(dev + l.min_p);
    sp.seeds = reinterpret_cast<const uint64_t*>(dev + l.seeds);
    sp.offsets = reinterpret_cast<const uint64_t*>(dev + l.offsets);
    sp.num_rows = rows;
    sp.vocab = vocab;
    TANDEM_RETURN_IF_ERROR(kernels::LaunchSampling(sp, stream));
  } else {
    TANDEM_RETURN_IF_ERROR(kernels::LaunchArgmax({logits, vocab, tokens, rows, vocab}, stream));
  }
  TANDEM_RETURN_IF_ERROR(kernels::LaunchRejectMaskedTokens({logits, vocab, tokens, rows, vocab}, stream));
  if (max_top >= 0) {
    kernels::LogprobsParams lp;
    lp.logits = logits;
    lp.logits_stride = vocab;
    lp.temperature = sampled ? reinterpret_cast<const float*>(dev + l.temperature) : nullptr;
    lp.tokens = tokens;
    lp.num_top = reinterpret_cast<const int32_t*>(dev + l.num_top);
    lp.max_top = max_top;
    lp.out = reinterpret_cast<kernels::LogprobEntry*>(dev + l.logprobs);
    lp.num_rows = rows;
    lp.vocab = vocab;
    TANDEM_RETURN_IF_ERROR(kernels::LaunchLogprobs(lp, stream));
  }
  // The tokens and the logprob entries after them, in one copy.
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host + l.tokens, tokens, l.total_bytes - l.tokens,
                                              cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

Status CudaBackend::SampleTokens(Tensor logits, std::span<const SampleRequest> requests, std::span<SampledToken> out) {
  if (recording_) return FailedPreconditionError("SampleTokens inside a graph step");
  TANDEM_RETURN_IF_ERROR(CheckSampleArgs(logits, Device::kCuda, requests, out));
  if (requests.empty()) return Status::Ok();
  if (logits.shape[0] > std::numeric_limits<int32_t>::max() || logits.shape[1] > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError(fmt::format("SampleTokens: logits {} too large", logits.DebugString()));
  }
  const int rows = static_cast<int>(logits.shape[0]), vocab = static_cast<int>(logits.shape[1]);
  if (sampling_ == nullptr) sampling_.reset(new SamplingState());
  TANDEM_RETURN_IF_ERROR(sampling_->Stage(requests, vocab));
  Status launched = sampling_->Launch(logits.As<float>(), rows, vocab, stream_);
  // Wait even after a failed launch: the next call rewrites the staging a queued copy may still read.
  Status synced = cuda::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  TANDEM_RETURN_IF_ERROR(launched);
  TANDEM_RETURN_IF_ERROR(synced);
  const int32_t* tokens = sampling_->host_tokens();
  const int stride = 1 + sampling_->max_top;
  for (int i = 0; i < rows; ++i) {
    if (tokens[i] < 0) {
      out[i] = SampledToken{-1, InvalidArgumentError("sampling: every token is masked or -inf"), {}};
      continue;
    }
    out[i] = SampledToken{tokens[i], Status::Ok(), {}};
    const int top = std::min(requests[i].params->logprobs, vocab);
    if (top < 0) continue;
    const kernels::LogprobEntry* entries = sampling_->host_logprobs() + static_cast<int64_t>(i) * stride;
    out[i].logprobs.logprob = entries[0].logprob;
    for (int j = 1; j <= top; ++j) out[i].logprobs.top.push_back(TokenLogprob{entries[j].token, entries[j].logprob});
  }
  return Status::Ok();
}

// Prompt logprobs reuse the logprobs kernel with each row's next prompt token as its
// "sampled" token and no temperature: staging holds tokens | num_top, then the entries come back.
Status CudaBackend::PromptLogprobs(Tensor logits, std::span<const TokenId> tokens, int k,
                                   std::span<SampledLogprobs> out) {
  if (recording_) return FailedPreconditionError("PromptLogprobs inside a graph step");
  TANDEM_RETURN_IF_ERROR(CheckPromptLogprobsArgs(logits, Device::kCuda, tokens, k, out));
  if (tokens.empty()) return Status::Ok();
  if (logits.shape[0] > std::numeric_limits<int32_t>::max() || logits.shape[1] > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError(fmt::format("PromptLogprobs: logits {} too large", logits.DebugString()));
  }
  const int rows = static_cast<int>(logits.shape[0]), vocab = static_cast<int>(logits.shape[1]);
  const int top = std::min(k, vocab);
  if (sampling_ == nullptr) sampling_.reset(new SamplingState());
  const size_t ids_bytes = AlignUp(rows * sizeof(int32_t));
  const size_t entries_at = 2 * ids_bytes;
  const size_t total = entries_at + static_cast<size_t>(rows) * (1 + top) * sizeof(kernels::LogprobEntry);
  TANDEM_RETURN_IF_ERROR(sampling_->Reserve(total));
  char* host = sampling_->staging.as<char>();
  char* dev = sampling_->device.as<char>();
  for (int i = 0; i < rows; ++i) {
    reinterpret_cast<int32_t*>(host)[i] = tokens[i];
    reinterpret_cast<int32_t*>(host + ids_bytes)[i] = top;
  }
  auto launch = [&]() -> Status {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dev, host, entries_at, cudaMemcpyHostToDevice, stream_));
    kernels::LogprobsParams lp;
    lp.logits = logits.As<float>();
    lp.logits_stride = vocab;
    lp.tokens = reinterpret_cast<const int32_t*>(dev);
    lp.num_top = reinterpret_cast<const int32_t*>(dev + ids_bytes);
    lp.max_top = top;
    lp.out = reinterpret_cast<kernels::LogprobEntry*>(dev + entries_at);
    lp.num_rows = rows;
    lp.vocab = vocab;
    TANDEM_RETURN_IF_ERROR(kernels::LaunchLogprobs(lp, stream_));
    TANDEM_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(host + entries_at, dev + entries_at, total - entries_at, cudaMemcpyDeviceToHost, stream_));
    return Status::Ok();
  };
  Status launched = launch();
  // Wait even after a failed launch: the next call rewrites the staging a queued copy may still read.
  Status synced = cuda::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  TANDEM_RETURN_IF_ERROR(launched);
  TANDEM_RETURN_IF_ERROR(synced);
  const auto* entries = reinterpret_cast<const kernels::LogprobEntry*>(host + entries_at);
  for (int i = 0; i < rows; ++i) {
    const kernels::LogprobEntry* row = entries + static_cast<int64_t>(i) * (1 + top);
    out[i] = SampledLogprobs{row[0].logprob, {}};
    for (int j = 1; j <= top; ++j) out[i].top.push_back(TokenLogprob{row[j].token, row[j].logprob});
  }
  return Status::Ok();
}

}  // namespace tandem::runtime
