// WeightUploader: copies checkpoint tensors to a backend device in its compute
// dtype (F32 on the CPU reference, BF16 on CUDA), after checking their names,
// dtypes and shapes. A tensor already in that dtype is copied as raw bytes;
// the others are converted (bf16/f16 -> f32, f32/f16 -> bf16 through f32,
// round to nearest even). Fused projections (QKV, gate/up) are one device
// tensor of concatenated rows, each part written straight into its rows. The
// bytes go through Backend::FillDevice, each chunk filled by a few threads.
// With an expected total it logs progress at INFO.
// Thread rule: one thread (the backend's) calls Upload; the fill threads are internal.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/model/weights.h"
#include "common/runtime/backend.h"
#include "common/runtime/worker_group.h"

namespace tandem::runtime {

// One piece of a (possibly fused) weight: a checkpoint tensor and its expected shape.
struct WeightPart {
  std::string name;
  std::vector<int64_t> shape;
};

struct WeightUploadOptions {
  // Threads filling each chunk (copies, conversions), the uploading thread included.
  // Clamped to the host's hardware threads.
  int num_threads = 4;
  // A progress line at least this often (seconds) while uploading, and at every
  // further 10 % of the expected bytes once a second has passed since the last line.
  double progress_interval_s = 2.0;
};

// What an uploader has done so far.
struct WeightUploadStats {
  int64_t tensors = 0;          // device tensors written
  int64_t bytes = 0;            // device bytes written
  int64_t converted_bytes = 0;  // of those, bytes converted from another dtype (the rest: raw copies)
  double seconds = 0;           // wall time inside Upload
  double fill_seconds = 0;      // of which filling host chunks (checkpoint reads, conversions)
  double allocate_seconds = 0;  // of which Backend::Allocate
};

class WeightUploader {
 public:
  // `expected_bytes`: the device bytes all uploads will write, for progress
  // lines; 0 logs none.
  WeightUploader(Backend* backend, const model::ModelWeights& weights, int64_t expected_bytes = 0,
                 const WeightUploadOptions& options = {});

  // The parts concatenated along dim 0 (all parts share their other dims).
  // NotFound when a name is missing; InvalidArgument naming the tensor when its
  // shape differs from the expected one, its dtype is not F32/F16/BF16, or its
  // byte size does not match its shape, and when the backend's compute dtype is
  // neither F32 nor BF16.
  StatusOr<Buffer> Upload(const std::vector<WeightPart>& parts);

  const WeightUploadStats& stats() const { return stats_; }
  int num_threads() const { return workers_.num_threads(); }

 private:
  // A checked part: its checkpoint bytes and where its rows start in the device tensor.
  struct Segment {
    const std::byte* src = nullptr;
    DType src_dtype = DType::kF32;
    size_t dst_offset = 0;  // bytes into the device tensor
    size_t dst_bytes = 0;   // its bytes there
  };

  // Writes device bytes [offset, offset + out.size()) of the tensor made of `segments`.
  void FillRange(const std::vector<Segment>& segments, DType target, size_t offset, std::span<std::byte> out) const;
  // Logs a progress line when one is due.
  void MaybeLogProgress();

  Backend* backend_;
  const model::ModelWeights& weights_;
  int64_t expected_bytes_;
  WeightUploadOptions options_;
  WorkerGroup workers_;
  WeightUploadStats stats_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_log_s_ = 0;       // seconds since start_ at the last progress line
  int64_t last_log_bytes_ = 0;  // stats_.bytes then
};

}  // namespace tandem::runtime
