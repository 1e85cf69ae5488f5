// Weights onto the GPU through CudaBackend::FillDevice (pinned double-buffered
// chunks): bf16 checkpoints copied raw, f32 and f16 ones rounded to bf16, fused
// parts in mixed dtypes, read back bit for bit against the reference of
// tests/common/runtime/weight_reference.h, with chunks smaller than, equal to
// and larger than the tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "common/runtime/llama_weights.h"
#include "common/runtime/weight_upload.h"
#include "tests/common/runtime/cuda_test/cuda_test_util.h"
#include "tests/common/runtime/fake_weights.h"
#include "tests/common/runtime/weight_reference.h"

namespace tandem::runtime::testing {
namespace {

class CudaUploadTest : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaUploadTest, Bf16AndF32WeightsReadBackBitForBit) {
  TANDEM_SKIP_WITHOUT_GPU();
  ScratchDir dir;
  const int64_t cols = 1024;
  auto weights = WriteRandomCheckpoint(dir.path(), {{"raw", DType::kBF16, {1531, cols}},
                                                    {"wide", DType::kF32, {613, cols}},
                                                    {"q", DType::kBF16, {301, cols}},
                                                    {"k", DType::kF32, {203, cols}},
                                                    {"v", DType::kF16, {107, cols}},
                                                    {"norm", DType::kF32, {cols}}});
  CudaBackendOptions options;
  options.upload_chunk_bytes = GetParam();
  auto backend = MakeCudaBackend(options);
  WeightUploader uploader(backend.get(), *weights, 0, {.num_threads = 4});
  // Uploaded back to back, so chunk copies of one tensor are in flight while the next fills.
  StatusOr<Buffer> raw = uploader.Upload({{"raw", {1531, cols}}});
  StatusOr<Buffer> wide = uploader.Upload({{"wide", {613, cols}}});
  StatusOr<Buffer> qkv = uploader.Upload({{"q", {301, cols}}, {"k", {203, cols}}, {"v", {107, cols}}});
  StatusOr<Buffer> norm = uploader.Upload({{"norm", {cols}}});
  ASSERT_TRUE(raw.ok() && wide.ok() && qkv.ok() && norm.ok());
  EXPECT_EQ(raw->tensor().dtype, DType::kBF16);
  EXPECT_TRUE(Download(*backend, *raw) == ExpectedDeviceBytes(*weights, {"raw"}, DType::kBF16));
  EXPECT_TRUE(Download(*backend, *wide) == ExpectedDeviceBytes(*weights, {"wide"}, DType::kBF16));
  EXPECT_TRUE(Download(*backend, *qkv) == ExpectedDeviceBytes(*weights, {"q", "k", "v"}, DType::kBF16));
  EXPECT_TRUE(Download(*backend, *norm) == ExpectedDeviceBytes(*weights, {"norm"}, DType::kBF16));
  // The raw tensor is byte for byte the checkpoint's.
  const model::TensorView view = *weights->Get("raw");
  const std::vector<std::byte> got = Download(*backend, *raw);
  EXPECT_EQ(std::memcmp(got.data(), view.data, view.num_bytes), 0);
  EXPECT_EQ(uploader.stats().converted_bytes, (613 + 203 + 107 + 1) * cols * 2);
}

// 256 B (the smallest), 64 KiB (several chunks per tensor), 16 MiB (the default: one chunk).
INSTANTIATE_TEST_SUITE_P(Chunks, CudaUploadTest, ::testing::Values(size_t{256}, size_t{64} << 10, size_t{16} << 20));

TEST(CudaFillDeviceTest, ChunksCoverTheTensorInOrder) {
  TANDEM_SKIP_WITHOUT_GPU();
  CudaBackendOptions options;
  options.upload_chunk_bytes = 4096;
  auto backend = MakeCudaBackend(options);
  const int64_t n = 4096 * 3 + 1000;
  StatusOr<Buffer> dst = backend->Allocate(DType::kU8, {n});
  ASSERT_TRUE(dst.ok());
  std::vector<size_t> offsets;
  ASSERT_TRUE(backend
                  ->FillDevice(dst->tensor(),
                               [&](size_t offset, std::span<std::byte> chunk) {
                                 offsets.push_back(offset);
                                 for (size_t i = 0; i < chunk.size(); ++i)
                                   chunk[i] = static_cast<std::byte>((offset + i) * 7 % 251);
                                 return Status::Ok();
                               })
                  .ok());
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 4096, 8192, 12288}));
  std::vector<std::byte> got = Download(*backend, *dst);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<std::byte>(i * 7 % 251)) << i;
  // A fill error stops the fill and comes back.
  int calls = 0;
  Status failed = backend->FillDevice(dst->tensor(), [&](size_t, std::span<std::byte>) {
    ++calls;
    return InternalError("bad chunk");
  });
  EXPECT_EQ(failed.code(), StatusCode::kInternal);
  EXPECT_EQ(calls, 1);
}

// A whole small model loaded the new way equals the reference, tensor by tensor.
TEST(CudaUploadModelTest, LlamaWeightsMatchReference) {
  TANDEM_SKIP_WITHOUT_GPU();
  const model::ModelConfig config = SmallConfig("qwen2");
  FakeWeights fake(config, 3);
  std::vector<model::TensorSpec> specs;
  const DType rotation[] = {DType::kBF16, DType::kF32, DType::kF16};
  for (const std::string& name : fake.Names()) {
    specs.push_back({name, rotation[specs.size() % 3], fake.Get(name)->shape});
  }
  ScratchDir dir;
  auto weights = WriteRandomCheckpoint(dir.path(), specs);
  CudaBackendOptions options;
  options.upload_chunk_bytes = 1024;
  auto backend = MakeCudaBackend(options);
  StatusOr<LlamaWeights> w = LlamaWeights::Load(config, *weights, backend.get());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(Download(*backend, w->embed_tokens) ==
              ExpectedDeviceBytes(*weights, {"model.embed_tokens.weight"}, DType::kBF16));
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    EXPECT_TRUE(Download(*backend, w->layers[i].qkv_proj) ==
                ExpectedDeviceBytes(
                    *weights,
                    {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"},
                    DType::kBF16));
    EXPECT_TRUE(Download(*backend, w->layers[i].qkv_bias) ==
                ExpectedDeviceBytes(
                    *weights, {p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"},
                    DType::kBF16));
    EXPECT_TRUE(Download(*backend, w->layers[i].gate_up_proj) ==
                ExpectedDeviceBytes(*weights, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, DType::kBF16));
    EXPECT_TRUE(Download(*backend, w->layers[i].down_proj) ==
                ExpectedDeviceBytes(*weights, {p + "mlp.down_proj.weight"}, DType::kBF16));
  }
}

}  // namespace
}  // namespace tandem::runtime::testing
