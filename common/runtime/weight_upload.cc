#include "common/runtime/weight_upload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/base/logging.h"

namespace tandem::runtime {
namespace {

// A chunk is split across the fill threads in pieces of at least this many bytes.
constexpr size_t kMinPieceBytes = 256 << 10;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Element loads and stores through memcpy: checkpoint bytes have no alignment guarantee.
template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void Store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// `n` elements of `from` at `src` as `to` at `dst`: raw bytes when the dtypes agree,
// otherwise each value through fp32, rounded to nearest even when narrowing.
// REQUIRES: from in {F32, F16, BF16}, to in {F32, BF16}.
void Convert(DType from, const std::byte* src, DType to, std::byte* dst, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * DTypeSize(to));
  } else if (to == DType::kF32 && from == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) Store(dst + 4 * i, BF16ToF32(Load<uint16_t>(src + 2 * i)));
  } else if (to == DType::kF32) {  // from F16
    for (size_t i = 0; i < n; ++i) Store(dst + 4 * i, F16ToF32(Load<uint16_t>(src + 2 * i)));
  } else if (from == DType::kF32) {  // to BF16
    for (size_t i = 0; i < n; ++i) Store(dst + 2 * i, F32ToBF16(Load<float>(src + 4 * i)));
  } else {  // F16 to BF16
    for (size_t i = 0; i < n; ++i) Store(dst + 2 * i, F32ToBF16(F16ToF32(Load<uint16_t>(src + 2 * i))));
  }
}

int ClampThreads(int requested) {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, hardware > 0 ? std::min(requested, hardware) : requested);
}

}  // namespace

WeightUploader::WeightUploader(Backend* backend, const model::ModelWeights& weights, int64_t expected_bytes,
                               const WeightUploadOptions& options)
    : backend_(backend),
      weights_(weights),
      expected_bytes_(expected_bytes),
      options_(options),
      workers_(ClampThreads(options.num_threads)) {}

StatusOr<Buffer> WeightUploader::Upload(const std::vector<WeightPart>& parts) {
  TANDEM_CHECK(!parts.empty());
  const Clock::time_point start = Clock::now();
  const DType target = backend_->compute_dtype();
  if (target != DType::kF32 && target != DType::kBF16) {
    return InvalidArgumentError(fmt::format("backend compute dtype {} is not supported", DTypeName(target)));
  }
  std::vector<int64_t> shape = parts[0].shape;
  std::vector<Segment> segments;
  size_t total = 0;
  int64_t converted = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightPart& part = parts[i];
    TANDEM_CHECK(!part.shape.empty() && part.shape.size() == shape.size() &&
                 std::equal(part.shape.begin() + 1, part.shape.end(), shape.begin() + 1))
        << "fused parts must agree past dim 0: " << part.name;
    if (i > 0) shape[0] += part.shape[0];
    TANDEM_ASSIGN_OR_RETURN(model::TensorView view, weights_.Get(part.name));
    if (view.shape != part.shape) {
      return InvalidArgumentError(
          fmt::format("tensor {}: shape {}, expected {}", part.name, ShapeString(view.shape), ShapeString(part.shape)));
    }
    if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
      return InvalidArgumentError(fmt::format("tensor {}: unsupported dtype {}", part.name, DTypeName(view.dtype)));
    }
    size_t count = 1;
    for (int64_t d : part.shape) count *= static_cast<size_t>(d);
    if (view.data == nullptr || view.num_bytes != count * DTypeSize(view.dtype)) {
      return InvalidArgumentError(
          fmt::format("tensor {}: {} bytes for shape {}", part.name, view.num_bytes, ShapeString(part.shape)));
    }
    const size_t bytes = count * DTypeSize(target);
    segments.push_back({.src = view.data, .src_dtype = view.dtype, .dst_offset = total, .dst_bytes = bytes});
    total += bytes;
    if (view.dtype != target) converted += static_cast<int64_t>(bytes);
  }

  const Clock::time_point allocate_start = Clock::now();
  TANDEM_ASSIGN_OR_RETURN(Buffer buffer, backend_->Allocate(target, shape));
  stats_.allocate_seconds += SecondsSince(allocate_start);
  const size_t elem = DTypeSize(target);
  Status filled = backend_->FillDevice(buffer.tensor(), [&](size_t offset, std::span<std::byte> chunk) {
    const Clock::time_point fill_start = Clock::now();
    const size_t elems = chunk.size() / elem;
    const int pieces = static_cast<int>(std::clamp<size_t>(chunk.size() / kMinPieceBytes, 1, workers_.num_threads()));
    workers_.Run(pieces, [&](int k) {
      const size_t begin = elems * k / pieces * elem;
      const size_t end = k + 1 == pieces ? chunk.size() : elems * (k + 1) / pieces * elem;
      FillRange(segments, target, offset + begin, chunk.subspan(begin, end - begin));
    });
    stats_.fill_seconds += SecondsSince(fill_start);
    stats_.bytes += static_cast<int64_t>(chunk.size());
    MaybeLogProgress();
    return Status::Ok();
  });
  TANDEM_RETURN_IF_ERROR(filled);
  ++stats_.tensors;
  stats_.converted_bytes += converted;
  stats_.seconds += SecondsSince(start);
  return buffer;
}

void WeightUploader::FillRange(const std::vector<Segment>& segments, DType target, size_t offset,
                               std::span<std::byte> out) const {
  const size_t end = offset + out.size();
  const size_t elem = DTypeSize(target);
  for (const Segment& s : segments) {
    const size_t begin = std::max(offset, s.dst_offset);
    const size_t stop = std::min(end, s.dst_offset + s.dst_bytes);
    if (begin >= stop) continue;
    const size_t first = (begin - s.dst_offset) / elem;
    Convert(s.src_dtype, s.src + first * DTypeSize(s.src_dtype), target, out.data() + (begin - offset),
            (stop - begin) / elem);
  }
}

void WeightUploader::MaybeLogProgress() {
  if (expected_bytes_ <= 0) return;
  const double now = SecondsSince(start_);
  const bool interval = now - last_log_s_ >= options_.progress_interval_s;
  const bool tenth = stats_.bytes - last_log_bytes_ >= expected_bytes_ / 10 && now - last_log_s_ >= 1.0;
  if (!interval && !tenth) return;
  TANDEM_LOG_INFO("loading weights: {:.1f} / {:.1f} GB ({:.0f} %), {:.1f} s", stats_.bytes / 1e9, expected_bytes_ / 1e9,
                  100.0 * stats_.bytes / expected_bytes_, now);
  last_log_s_ = now;
  last_log_bytes_ = stats_.bytes;
}

}  // namespace tandem::runtime
