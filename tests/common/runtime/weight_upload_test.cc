// WeightUploader and LlamaWeights::Load against a reference: each uploaded
// element must equal the checkpoint element read as fp32 (TensorView::GetFloat)
// and, for a bf16 device, rounded with F32ToBF16, bit for bit; a tensor already
// in the device dtype must arrive as its raw bytes. Checkpoints mix bf16, f16
// and f32 tensors (also inside one fused weight) and hold every bit pattern
// class: zeros, subnormals, infinities, rounding ties.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "common/model/safetensors_writer.h"
#include "common/runtime/cpu_backend.h"
#include "common/runtime/llama_weights.h"
#include "common/runtime/weight_upload.h"
#include "common/runtime/worker_group.h"
#include "tests/common/runtime/fake_weights.h"
#include "tests/common/runtime/weight_reference.h"

namespace tandem::runtime {
namespace {

using testing::Download;
using testing::ExpectedDeviceBytes;
using testing::ScratchDir;
using testing::WriteRandomCheckpoint;

// Host memory posing as a device of any compute dtype, filled in chunks of
// `chunk_bytes` (0: Backend's default FillDevice, through CopyToDevice). A test
// seam: the CPU backend's own fill uses 64 MiB chunks and only F32.
class ChunkedHostBackend final : public Backend {
 public:
  ChunkedHostBackend(DType compute, size_t chunk_bytes) : compute_(compute), chunk_bytes_(chunk_bytes) {}
  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return compute_; }
  StatusOr<Buffer> Allocate(DType dtype, const std::vector<int64_t>& shape) override {
    return cpu_.Allocate(dtype, shape);  // the buffers belong to cpu_
  }
  Status CopyToDevice(const void* src, size_t n, Tensor dst) override { return cpu_.CopyToDevice(src, n, dst); }
  Status CopyToHost(Tensor src, void* dst, size_t n) override { return cpu_.CopyToHost(src, dst, n); }
  Status FillDevice(Tensor dst, const HostFill& fill) override {
    if (chunk_bytes_ == 0) return Backend::FillDevice(dst, fill);
    for (size_t offset = 0; offset < dst.NumBytes(); offset += chunk_bytes_) {
      const size_t n = std::min(chunk_bytes_, dst.NumBytes() - offset);
      TANDEM_RETURN_IF_ERROR(fill(offset, std::span<std::byte>(static_cast<std::byte*>(dst.data) + offset, n)));
      ++chunks_;
    }
    return Status::Ok();
  }
  Status Embedding(Tensor, Tensor, Tensor) override { return UnimplementedError("test backend"); }
  Status RmsNorm(const RmsNormParams&) override { return UnimplementedError("test backend"); }
  Status Linear(const LinearParams&) override { return UnimplementedError("test backend"); }
  Status RopeKvWrite(const RopeKvWriteParams&) override { return UnimplementedError("test backend"); }
  Status PagedAttention(const PagedAttentionParams&) override { return UnimplementedError("test backend"); }
  Status SiluAndMul(Tensor, Tensor) override { return UnimplementedError("test backend"); }
  Status GatherRows(Tensor, Tensor, Tensor) override { return UnimplementedError("test backend"); }
  int chunks() const { return chunks_; }

 protected:
  void Free(void*) override { TANDEM_CHECK(false) << "ChunkedHostBackend owns no buffers"; }

 private:
  CpuBackend cpu_;
  DType compute_;
  size_t chunk_bytes_;
  int chunks_ = 0;
};

struct UploadCase {
  DType target;
  size_t chunk_bytes;  // 0: Backend's default FillDevice
  int threads;
};

class WeightUploaderTest : public ::testing::TestWithParam<UploadCase> {};

// One fused weight of three parts in three dtypes (a QKV), large enough for several
// chunks and several fill threads per chunk, with boundaries of chunks, pieces and
// parts all falling in different places.
TEST_P(WeightUploaderTest, FusedMixedDtypesMatchReferenceBitForBit) {
  const UploadCase c = GetParam();
  ScratchDir dir;
  const int64_t cols = 1000;
  auto weights = WriteRandomCheckpoint(dir.path(), {{"q", DType::kF16, {301, cols}},
                                                    {"k", DType::kBF16, {203, cols}},
                                                    {"v", DType::kF32, {107, cols}},
                                                    {"norm", DType::kBF16, {cols}}});
  ChunkedHostBackend backend(c.target, c.chunk_bytes);
  WeightUploadOptions options;
  options.num_threads = c.threads;
  const int64_t fused_bytes = (301 + 203 + 107) * cols * static_cast<int64_t>(DTypeSize(c.target));
  WeightUploader uploader(&backend, *weights, fused_bytes + cols * static_cast<int64_t>(DTypeSize(c.target)), options);
  StatusOr<Buffer> qkv = uploader.Upload({{"q", {301, cols}}, {"k", {203, cols}}, {"v", {107, cols}}});
  ASSERT_TRUE(qkv.ok()) << qkv.status().ToString();
  EXPECT_EQ(qkv->tensor().dtype, c.target);
  EXPECT_EQ(qkv->tensor().shape[0], 611);
  EXPECT_EQ(qkv->tensor().shape[1], cols);
  EXPECT_TRUE(Download(backend, *qkv) == ExpectedDeviceBytes(*weights, {"q", "k", "v"}, c.target));

  StatusOr<Buffer> norm = uploader.Upload({{"norm", {cols}}});
  ASSERT_TRUE(norm.ok()) << norm.status().ToString();
  EXPECT_TRUE(Download(backend, *norm) == ExpectedDeviceBytes(*weights, {"norm"}, c.target));

  const WeightUploadStats& s = uploader.stats();
  EXPECT_EQ(s.tensors, 2);
  EXPECT_EQ(s.bytes, fused_bytes + cols * static_cast<int64_t>(DTypeSize(c.target)));
  // Converted: every part whose checkpoint dtype is not the device's.
  int64_t converted = 0;
  for (auto [rows, dtype] : {std::pair{301, DType::kF16}, {203, DType::kBF16}, {107, DType::kF32}, {1, DType::kBF16}}) {
    if (dtype != c.target) converted += rows * cols * static_cast<int64_t>(DTypeSize(c.target));
  }
  EXPECT_EQ(s.converted_bytes, converted);
  if (c.chunk_bytes > 0) {
    EXPECT_GT(backend.chunks(), 2);
  }
}

// Chunks of 768 B (many per part), of 1 MiB + 768 B (four fill pieces each) and
// of 768 KiB (three pieces), and the default FillDevice's single chunk.
INSTANTIATE_TEST_SUITE_P(Targets, WeightUploaderTest,
                         ::testing::Values(UploadCase{DType::kBF16, 768, 3},
                                           UploadCase{DType::kBF16, (1 << 20) + 768, 4},
                                           UploadCase{DType::kF32, 768 << 10, 3}, UploadCase{DType::kF32, 0, 2},
                                           UploadCase{DType::kBF16, 0, 1}),
                         [](const ::testing::TestParamInfo<UploadCase>& info) {
                           return std::string(info.param.target == DType::kF32 ? "f32" : "bf16") + "_chunk" +
                                  std::to_string(info.param.chunk_bytes) + "_threads" +
                                  std::to_string(info.param.threads);
                         });

// Raw copies keep every bit, NaN payloads too (a conversion through fp32 would
// give the canonical 0x7fc0).
TEST(WeightUploaderRawTest, SameDtypeIsCopiedAsRawBytes) {
  ScratchDir dir;
  const std::vector<uint16_t> bits = {0x7fc1, 0xffff, 0x7f81, 0x0001, 0x8000, 0x3f80};
  std::vector<std::byte> raw(bits.size() * 2);
  std::memcpy(raw.data(), bits.data(), raw.size());
  TANDEM_CHECK_OK(model::WriteSafetensorsFile(dir.path() + "/model.safetensors", {{{"w", DType::kBF16, {2, 3}}, raw}}));
  auto weights = model::ModelWeights::Open(dir.path());
  ASSERT_TRUE(weights.ok());
  ChunkedHostBackend backend(DType::kBF16, 256);
  WeightUploader uploader(&backend, **weights);
  StatusOr<Buffer> w = uploader.Upload({{"w", {2, 3}}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(Download(backend, *w) == raw);
  EXPECT_EQ(uploader.stats().converted_bytes, 0);
}

TEST(WeightUploaderRawTest, ErrorsNameTheTensor) {
  ScratchDir dir;
  TANDEM_CHECK_OK(model::WriteSafetensorsFile(dir.path() + "/model.safetensors",
                                              {{{"w", DType::kBF16, {4, 8}}, testing::RandomBits(DType::kBF16, 32, 1)},
                                               {{"ids", DType::kI32, {4}}, std::vector<std::byte>(16)}}));
  auto weights = model::ModelWeights::Open(dir.path());
  ASSERT_TRUE(weights.ok());
  CpuBackend backend;
  WeightUploader uploader(&backend, **weights);
  Status missing = uploader.Upload({{"nope", {4, 8}}}).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.ToString();
  Status shape = uploader.Upload({{"w", {8, 4}}}).status();
  EXPECT_EQ(shape.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shape.message().find("tensor w: shape [4, 8], expected [8, 4]"), std::string::npos) << shape.ToString();
  Status dtype = uploader.Upload({{"ids", {4}}}).status();
  EXPECT_NE(dtype.message().find("tensor ids: unsupported dtype"), std::string::npos) << dtype.ToString();
  EXPECT_EQ(backend.live_buffers(), 0);
}

// Every weight of a small model of each family, checkpoint tensors in rotating
// dtypes (so fused QKV and gate/up mix them), loaded onto the CPU backend (f32)
// and onto a bf16 device.
TEST(LlamaWeightsLoadTest, MixedDtypeCheckpointMatchesReference) {
  model::ModelConfig llama_bias = testing::SmallConfig("llama");
  llama_bias.attention_bias = true;  // q/k/v and o_proj biases
  for (const model::ModelConfig& config :
       {testing::SmallConfig("llama"), testing::SmallConfig("qwen2"), testing::SmallConfig("qwen3"), llama_bias}) {
    SCOPED_TRACE(static_cast<int>(config.family));
    testing::FakeWeights fake(config, 1);
    std::vector<model::TensorSpec> specs;
    const DType rotation[] = {DType::kBF16, DType::kF16, DType::kF32};
    for (const std::string& name : fake.Names()) {
      specs.push_back({name, rotation[specs.size() % 3], fake.Get(name)->shape});
    }
    if (config.attention_bias) {
      for (int i = 0; i < config.num_layers; ++i) {
        specs.push_back(
            {"model.layers." + std::to_string(i) + ".self_attn.o_proj.bias", rotation[i % 3], {config.hidden_size}});
      }
    }
    ScratchDir dir;
    auto weights = WriteRandomCheckpoint(dir.path(), specs);
    CpuBackend cpu;
    ChunkedHostBackend bf16(DType::kBF16, 512);
    for (Backend* backend : {static_cast<Backend*>(&cpu), static_cast<Backend*>(&bf16)}) {
      const DType t = backend->compute_dtype();
      WeightUploadStats stats;
      StatusOr<LlamaWeights> w = LlamaWeights::Load(config, *weights, backend, {.num_threads = 3}, &stats);
      ASSERT_TRUE(w.ok()) << w.status().ToString();
      auto check = [&](const Buffer& b, const std::vector<std::string>& names) {
        SCOPED_TRACE(names[0]);
        EXPECT_TRUE(Download(*backend, b) == ExpectedDeviceBytes(*weights, names, t));
      };
      int64_t bytes = 0;
      for (const model::TensorSpec& spec : specs) {
        bytes += static_cast<int64_t>(spec.NumBytes() / DTypeSize(spec.dtype) * DTypeSize(t));
      }
      EXPECT_EQ(stats.bytes, bytes);  // every checkpoint tensor, once
      check(w->embed_tokens, {"model.embed_tokens.weight"});
      check(w->final_norm, {"model.norm.weight"});
      EXPECT_EQ(w->lm_head.tensor().defined(), !config.tie_word_embeddings);
      if (!config.tie_word_embeddings) check(w->lm_head, {"lm_head.weight"});
      ASSERT_EQ(w->layers.size(), static_cast<size_t>(config.num_layers));
      for (int i = 0; i < config.num_layers; ++i) {
        const std::string p = "model.layers." + std::to_string(i) + ".";
        const LlamaLayerWeights& l = w->layers[i];
        check(l.input_norm, {p + "input_layernorm.weight"});
        check(l.qkv_proj,
              {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"});
        if (config.attention_bias || config.family == model::ModelFamily::kQwen2) {
          check(l.qkv_bias, {p + "self_attn.q_proj.bias", p + "self_attn.k_proj.bias", p + "self_attn.v_proj.bias"});
        }
        if (config.qk_norm) {
          check(l.q_norm, {p + "self_attn.q_norm.weight"});
          check(l.k_norm, {p + "self_attn.k_norm.weight"});
        }
        check(l.o_proj, {p + "self_attn.o_proj.weight"});
        EXPECT_EQ(l.o_bias.tensor().defined(), config.attention_bias);
        if (config.attention_bias) check(l.o_bias, {p + "self_attn.o_proj.bias"});
        check(l.post_attention_norm, {p + "post_attention_layernorm.weight"});
        check(l.gate_up_proj, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"});
        check(l.down_proj, {p + "mlp.down_proj.weight"});
      }
    }
  }
}

TEST(WorkerGroupTest, RunsEveryTaskOnceAcrossBatches) {
  for (int threads : {1, 2, 4}) {
    WorkerGroup group(threads);
    EXPECT_EQ(group.num_threads(), threads);
    for (int num_tasks : {0, 1, 3, 4, 17}) {
      for (int batch = 0; batch < 20; ++batch) {
        std::vector<std::atomic<int>> runs(num_tasks);
        group.Run(num_tasks, [&](int i) { runs[i].fetch_add(1); });
        for (int i = 0; i < num_tasks; ++i) ASSERT_EQ(runs[i].load(), 1) << threads << " " << num_tasks << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::runtime
