#include "common/runtime/backend.h"

#include <utility>

namespace tandem::runtime {
namespace {

class ReadyFence final : public CopyFence {
 public:
  bool Ready() override { return true; }
};

// Copies at once through CopyToHost (which waits for the ops before it).
class SyncHostCopyQueue final : public HostCopyQueue {
 public:
  explicit SyncHostCopyQueue(Backend* backend) : backend_(backend) {}
  Status Enqueue(Tensor src, void* dst, size_t num_bytes) override {
    return backend_->CopyToHost(src, dst, num_bytes);
  }
  StatusOr<std::shared_ptr<CopyFence>> Mark() override { return std::shared_ptr<CopyFence>(ready_); }
  Status JoinCompute() override { return Status::Ok(); }

 private:
  Backend* backend_;
  std::shared_ptr<CopyFence> ready_ = std::make_shared<ReadyFence>();
};

}  // namespace

StatusOr<std::unique_ptr<HostCopyQueue>> Backend::CreateHostCopyQueue() {
  return std::unique_ptr<HostCopyQueue>(std::make_unique<SyncHostCopyQueue>(this));
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
