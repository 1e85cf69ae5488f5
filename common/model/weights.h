// ModelWeights: the tensors of a Hugging Face model directory, read from
// safetensors files (a single `model.safetensors`, or shards listed in
// `model.safetensors.index.json`) through read-only memory maps.
//
// Tensors are views into the maps: valid while the ModelWeights lives.
// Thread rule: immutable after Open, so safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::model {

// A read-only view of one tensor's bytes (row-major, dense, little-endian).
// `data` has no alignment guarantee: HF writers start the data section on an
// 8-byte boundary, but a tensor after one of odd byte size can sit anywhere.
// Copy (memcpy) before reading as wider types on platforms that care.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t num_bytes = 0;

  int64_t NumElements() const;
  // Element i converted to float (F32, F16, BF16 only). REQUIRES: i < NumElements().
  float GetFloat(int64_t i) const;
};

class ModelWeights {
 public:
  virtual ~ModelWeights() = default;

  // Opens `dir`. Every file's header is validated (size cap, JSON, dtypes,
  // offsets in range and non-overlapping, shapes consistent with byte sizes);
  // any failure is a Status naming the file and the tensor.
  static StatusOr<std::unique_ptr<ModelWeights>> Open(const std::string& dir);

  // The tensor called `name`, or NotFound.
  virtual StatusOr<TensorView> Get(const std::string& name) const = 0;
  // Get plus a shape check: InvalidArgument naming expected and actual shapes.
  StatusOr<TensorView> Get(const std::string& name, const std::vector<int64_t>& shape) const;
  virtual bool Contains(const std::string& name) const = 0;
  // Hints that `name`'s bytes are read soon: file maps ask the kernel to read them
  // ahead (madvise WILLNEED), so a cold page cache overlaps its reads with the
  // caller's work. Does nothing for an unknown name or weights held in memory.
  virtual void WillNeed(const std::string& name) const {}
  // All tensor names, sorted.
  virtual std::vector<std::string> Names() const = 0;
};

}  // namespace tandem::model
