// SafetensorsWriter: writes a `.safetensors` file in a streaming way: the
// header (all names, dtypes, shapes) first, then the tensor bytes in
// declaration order, in chunks of any size, so a 16 GB file never sits in memory.
// The header is padded with spaces so the data section starts 8-byte aligned.
// Thread rule: one thread at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base/dtype.h"
#include "common/base/status.h"

namespace tandem::model {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;

  // Elements x dtype size.
  uint64_t NumBytes() const;
};

class SafetensorsWriter {
 public:
  // Creates `path` (truncating it) and writes the header for `tensors`.
  // InvalidArgument on an empty or duplicate name or a negative dimension.
  static StatusOr<std::unique_ptr<SafetensorsWriter>> Create(const std::string& path, std::vector<TensorSpec> tensors,
                                                             std::map<std::string, std::string> metadata = {
                                                                 {"format", "pt"}});

  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends tensor bytes (tensors back to back, declaration order).
  // InvalidArgument when this would write past the last tensor.
  Status Append(const void* data, size_t num_bytes);
  // FailedPrecondition unless every declared byte was appended; then flushes and closes.
  Status Finish();

  uint64_t data_bytes() const { return data_bytes_; }

 private:
  SafetensorsWriter(std::string path, FILE* file, uint64_t data_bytes)
      : path_(std::move(path)), file_(file), data_bytes_(data_bytes) {}

  std::string path_;
  FILE* file_ = nullptr;
  uint64_t data_bytes_ = 0;     // total size of the data section
  uint64_t written_bytes_ = 0;  // appended so far
};

// A tensor held in memory, for small files (tests, fixtures).
struct TensorData {
  TensorSpec spec;
  std::vector<std::byte> bytes;  // spec.NumBytes() bytes, little-endian
};

// Writes `tensors` as one file. InvalidArgument if a byte count disagrees with its spec.
Status WriteSafetensorsFile(const std::string& path, const std::vector<TensorData>& tensors,
                            std::map<std::string, std::string> metadata = {{"format", "pt"}});

// Raw bytes of `values` converted to `dtype` (F32, F16 or BF16; round to nearest even).
std::vector<std::byte> EncodeFloats(const std::vector<float>& values, DType dtype);

}  // namespace tandem::model
