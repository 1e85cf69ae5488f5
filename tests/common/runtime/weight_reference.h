// The reference for weight-upload tests: checkpoints of random bit patterns in
// any float dtype, and the device bytes the upload must produce for them (each
// element read as fp32 with TensorView::GetFloat and, for a bf16 device,
// rounded with F32ToBF16; for non-NaN values that equals a raw copy when the
// dtypes agree).
// Thread rule: plain functions; ScratchDir belongs to one test.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/model/safetensors_writer.h"
#include "common/model/weights.h"
#include "common/runtime/backend.h"

namespace tandem::runtime::testing {

// `count` elements of `dtype` (F32, F16, BF16): a run of edge cases (+-0,
// subnormals, +-inf, the largest finite, bf16 rounding ties for F32), then
// random bit patterns (every exponent); never NaN.
std::vector<std::byte> RandomBits(DType dtype, size_t count, uint32_t seed);

// The device bytes for the checkpoint tensors `names`, concatenated, on a device of
// compute dtype `target` (F32 or BF16).
std::vector<std::byte> ExpectedDeviceBytes(const model::ModelWeights& weights, const std::vector<std::string>& names,
                                           DType target);

// The bytes of `buffer`, copied off its device.
std::vector<std::byte> Download(Backend& backend, const Buffer& buffer);

// A fresh directory under the temp dir named after the current test, removed with the object.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Writes `specs`, each filled with RandomBits, as dir/model.safetensors and opens `dir`.
std::unique_ptr<model::ModelWeights> WriteRandomCheckpoint(const std::string& dir,
                                                           const std::vector<model::TensorSpec>& specs);

}  // namespace tandem::runtime::testing
