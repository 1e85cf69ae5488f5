#include "tests/common/runtime/weight_reference.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>

namespace tandem::runtime::testing {
namespace {

bool IsNan(DType dtype, uint32_t bits) {
  if (dtype == DType::kF32) return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0;
  if (dtype == DType::kF16) return (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0;
  return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0;
}

}  // namespace

std::vector<std::byte> RandomBits(DType dtype, size_t count, uint32_t seed) {
  TANDEM_CHECK(dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16);
  std::mt19937 gen(seed);
  const size_t size = DTypeSize(dtype);
  std::vector<uint32_t> edges;
  if (dtype == DType::kF32) {
    // +-0, subnormals, +-inf, the largest finite, bf16 ties (to even: down, up), near-ties.
    edges = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u,
             0x7f7fffffu, 0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu, 0x7f7f8000u};
  } else if (dtype == DType::kF16) {
    edges = {0x0000u, 0x8000u, 0x0001u, 0x83ffu, 0x7c00u, 0xfc00u, 0x7bffu, 0x3c00u};
  } else {
    edges = {0x0000u, 0x8000u, 0x0001u, 0x807fu, 0x7f80u, 0xff80u, 0x7f7fu, 0x3f80u};
  }
  std::vector<std::byte> out(count * size);
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits = i < edges.size() ? edges[i] : gen();
    if (size == 2) bits &= 0xffffu;
    while (IsNan(dtype, bits)) bits = size == 2 ? gen() & 0xffffu : gen();
    std::memcpy(out.data() + i * size, &bits, size);  // little-endian host
  }
  return out;
}

std::vector<std::byte> ExpectedDeviceBytes(const model::ModelWeights& weights, const std::vector<std::string>& names,
                                           DType target) {
  std::vector<std::byte> out;
  for (const std::string& name : names) {
    StatusOr<model::TensorView> view = weights.Get(name);
    TANDEM_CHECK(view.ok()) << view.status().ToString();
    for (int64_t i = 0; i < view->NumElements(); ++i) {
      const float f = view->GetFloat(i);
      const size_t at = out.size();
      out.resize(at + DTypeSize(target));
      if (target == DType::kF32) {
        std::memcpy(out.data() + at, &f, 4);
      } else {
        const uint16_t h = F32ToBF16(f);
        std::memcpy(out.data() + at, &h, 2);
      }
    }
  }
  return out;
}

std::vector<std::byte> Download(Backend& backend, const Buffer& buffer) {
  std::vector<std::byte> out(buffer.tensor().NumBytes());
  TANDEM_CHECK_OK(backend.CopyToHost(buffer.tensor(), out.data(), out.size()));
  return out;
}

ScratchDir::ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& ch : name) {
    if (ch == '/') ch = '_';  // parameterized names
  }
  path_ = std::filesystem::temp_directory_path() / ("tandem_weights_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::unique_ptr<model::ModelWeights> WriteRandomCheckpoint(const std::string& dir,
                                                           const std::vector<model::TensorSpec>& specs) {
  std::vector<model::TensorData> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    tensors.push_back({specs[i], RandomBits(specs[i].dtype, specs[i].NumBytes() / DTypeSize(specs[i].dtype),
                                            static_cast<uint32_t>(i + 1))});
  }
  TANDEM_CHECK_OK(model::WriteSafetensorsFile(dir + "/model.safetensors", tensors));
  StatusOr<std::unique_ptr<model::ModelWeights>> weights = model::ModelWeights::Open(dir);
  TANDEM_CHECK(weights.ok()) << weights.status().ToString();
  return std::move(weights).value();
}

}  // namespace tandem::runtime::testing
