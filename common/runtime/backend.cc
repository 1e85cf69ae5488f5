#include "common/runtime/backend.h"

#include <utility>

namespace tandem::runtime {

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
