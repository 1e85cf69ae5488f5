#include "common/runtime/backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace tandem::runtime {
namespace {

class ReadyFence final : public CopyFence {
 public:
  bool Ready() override { return true; }
};

// Copies at once through CopyToHost / CopyToDevice (which wait for the ops before them).
class SyncHostCopyQueue final : public HostCopyQueue {
 public:
  explicit SyncHostCopyQueue(Backend* backend) : backend_(backend) {}
  Status Enqueue(Tensor src, void* dst, size_t num_bytes) override { return backend_->CopyToHost(src, dst, num_bytes); }
  Status EnqueueToDevice(const void* src, Tensor dst, size_t num_bytes) override {
    return backend_->CopyToDevice(src, num_bytes, dst);
  }
  StatusOr<std::shared_ptr<CopyFence>> Mark() override { return std::shared_ptr<CopyFence>(ready_); }
  Status JoinCompute() override { return Status::Ok(); }

 private:
  Backend* backend_;
  std::shared_ptr<CopyFence> ready_ = std::make_shared<ReadyFence>();
};

// `logits` (F32 [rows, vocab]) readable on the host: in place on the CPU, else copied into *scratch.
StatusOr<std::span<const float>> HostLogits(Backend& backend, const Tensor& logits, std::vector<float>* scratch) {
  const size_t n = static_cast<size_t>(logits.shape[0]) * static_cast<size_t>(logits.shape[1]);
  if (backend.device() == Device::kCpu) return std::span<const float>(logits.As<const float>(), n);
  scratch->resize(n);
  TANDEM_RETURN_IF_ERROR(backend.CopyToHost(logits, scratch->data(), logits.NumBytes()));
  return std::span<const float>(*scratch);
}

}  // namespace

Status Backend::FillDevice(Tensor dst, const HostFill& fill) {
  if (!dst.defined() || dst.device != device()) {
    return InvalidArgumentError(fmt::format("FillDevice: {} is not on this backend", dst.DebugString()));
  }
  constexpr size_t kChunkBytes = 16 << 20;
  const size_t total = dst.NumBytes();
  std::vector<std::byte> chunk(std::min(total, kChunkBytes));
  for (size_t offset = 0; offset < total; offset += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, total - offset);
    TANDEM_RETURN_IF_ERROR(fill(offset, std::span<std::byte>(chunk.data(), n)));
    Tensor part(static_cast<std::byte*>(dst.data) + offset, DType::kU8, dst.device, {static_cast<int64_t>(n)});
    TANDEM_RETURN_IF_ERROR(CopyToDevice(chunk.data(), n, part));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<HostCopyQueue>> Backend::CreateHostCopyQueue(CopyQueueOptions) {
  return std::unique_ptr<HostCopyQueue>(std::make_unique<SyncHostCopyQueue>(this));
}

StatusOr<std::shared_ptr<CopyFence>> Backend::MarkCompute() {
  static const std::shared_ptr<CopyFence> ready = std::make_shared<ReadyFence>();
  return ready;
}

Status Backend::LinearAsOps(const LinearParams& p, const std::function<Status(const LinearParams&)>& product) {
  TANDEM_RETURN_IF_ERROR(product({.x = p.x,
                                  .weight = p.weight,
                                  .bias = p.bias,
                                  .out = p.silu_mul ? p.scratch : p.out,
                                  .accumulate = p.accumulate}));
  if (!p.silu_mul) return Status::Ok();
  return SiluAndMul(p.scratch, p.out);
}

Status Backend::CheckSampleArgs(const Tensor& logits, Device device, std::span<const SampleRequest> requests,
                                std::span<const SampledToken> out) {
  if (!logits.defined() || logits.dtype != DType::kF32 || logits.device != device || logits.ndim != 2 ||
      logits.shape[1] <= 0 || logits.shape[0] != static_cast<int64_t>(requests.size())) {
    return InvalidArgumentError(
        fmt::format("SampleTokens: logits {} for {} requests", logits.DebugString(), requests.size()));
  }
  if (out.size() != requests.size()) {
    return InvalidArgumentError(fmt::format("SampleTokens: {} outputs for {} requests", out.size(), requests.size()));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].params == nullptr) {
      return InvalidArgumentError(fmt::format("SampleTokens: row {} has no params", i));
    }
    const size_t mask_words = requests[i].allowed_tokens.size();
    if (mask_words != 0 && mask_words != static_cast<size_t>((logits.shape[1] + 31) / 32)) {
      return InvalidArgumentError(
          fmt::format("SampleTokens: row {} has a token mask of {} words for vocab {}", i, mask_words, logits.shape[1]));
    }
  }
  return Status::Ok();
}

Status Backend::SampleTokens(Tensor logits, std::span<const SampleRequest> requests, std::span<SampledToken> out) {
  TANDEM_RETURN_IF_ERROR(CheckSampleArgs(logits, device(), requests, out));
  if (requests.empty()) return Status::Ok();
  const size_t vocab = static_cast<size_t>(logits.shape[1]);
  TANDEM_ASSIGN_OR_RETURN(std::span<const float> all, HostLogits(*this, logits, &host_logits_));
  for (size_t i = 0; i < requests.size(); ++i) {
    StatusOr<TokenId> token = host_sampler_.Sample(all.subspan(i * vocab, vocab), requests[i]);
    if (!token.ok()) {
      out[i] = SampledToken{-1, token.status(), {}};
      continue;
    }
    out[i] = SampledToken{*token, Status::Ok(), {}};
    if (requests[i].params->logprobs >= 0) out[i].logprobs = host_sampler_.Logprobs(*requests[i].params, *token);
  }
  return Status::Ok();
}

Status Backend::CheckPromptLogprobsArgs(const Tensor& logits, Device device, std::span<const TokenId> tokens, int k,
                                        std::span<const SampledLogprobs> out) {
  if (!logits.defined() || logits.dtype != DType::kF32 || logits.device != device || logits.ndim != 2 ||
      logits.shape[1] <= 0 || logits.shape[0] != static_cast<int64_t>(tokens.size()) || out.size() != tokens.size() ||
      k < 0 || k > kMaxTopLogprobs) {
    return InvalidArgumentError(fmt::format("PromptLogprobs: logits {} for {} tokens, {} outputs, k {}",
                                            logits.DebugString(), tokens.size(), out.size(), k));
  }
  return Status::Ok();
}

Status Backend::PromptLogprobs(Tensor logits, std::span<const TokenId> tokens, int k, std::span<SampledLogprobs> out) {
  TANDEM_RETURN_IF_ERROR(CheckPromptLogprobsArgs(logits, device(), tokens, k, out));
  if (tokens.empty()) return Status::Ok();
  const size_t vocab = static_cast<size_t>(logits.shape[1]);
  TANDEM_ASSIGN_OR_RETURN(std::span<const float> all, HostLogits(*this, logits, &host_logits_));
  for (size_t i = 0; i < tokens.size(); ++i) {
    out[i] = Sampler::RowLogprobs(all.subspan(i * vocab, vocab), 0.0f, tokens[i], k);
  }
  return Status::Ok();
}

Buffer::Buffer(Buffer&& other) noexcept
    : tensor_(std::exchange(other.tensor_, Tensor())), owner_(std::exchange(other.owner_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    tensor_ = std::exchange(other.tensor_, Tensor());
    owner_ = std::exchange(other.owner_, nullptr);
  }
  return *this;
}

Buffer::~Buffer() { Reset(); }

void Buffer::Reset() {
  if (owner_ != nullptr && tensor_.data != nullptr) owner_->Free(tensor_.data);
  tensor_ = Tensor();
  owner_ = nullptr;
}

}  // namespace tandem::runtime
