#include "tools/make_model/weight_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

#include "common/model/model_tensors.h"
#include "common/model/safetensors_writer.h"

namespace tandem::tools {
namespace {

using model::TensorSpec;

constexpr int64_t kChunkElements = 1 << 20;

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(std::string_view name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// xoshiro256**: small, fast, good enough for random weights.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = SplitMix64(&seed);
  }
  uint64_t Next() {
    uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

bool IsNormWeight(const std::string& name) {
  constexpr std::string_view kSuffix = "norm.weight";
  return name.size() >= kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// Chunk `chunk` of tensor `spec`, encoded in spec.dtype.
std::vector<std::byte> GenerateChunk(const TensorSpec& spec, int64_t chunk, const WeightWriterOptions& options) {
  int64_t total = static_cast<int64_t>(spec.NumBytes() / DTypeSize(spec.dtype));
  int64_t count = std::min(kChunkElements, total - chunk * kChunkElements);
  uint64_t seed_state = options.seed ^ HashName(spec.name);
  SplitMix64(&seed_state);
  Rng rng(seed_state + static_cast<uint64_t>(chunk) * 0x632be59bd9b4e019ull);
  bool norm = IsNormWeight(spec.name);
  float scale = norm ? options.norm_std : options.std;
  float offset = norm ? 1.0f : 0.0f;
  std::vector<float> values(static_cast<size_t>(count));
  // Marsaglia's polar method in float: one 64-bit draw gives the two
  // uniforms, and each accepted pair gives two normals (no trigonometry).
  constexpr float kToUnit = 1.0f / (1u << 23);
  for (int64_t i = 0; i < count;) {
    uint64_t bits = rng.Next();
    float u = static_cast<float>(bits >> 40) * kToUnit - 1.0f;               // [-1, 1)
    float v = static_cast<float>((bits >> 16) & 0xffffff) * kToUnit - 1.0f;  // [-1, 1)
    float s = u * u + v * v;
    if (s >= 1.0f || s == 0.0f) continue;
    float f = std::sqrt(-2.0f * std::log(s) / s);
    values[i++] = offset + scale * u * f;
    if (i < count) values[i++] = offset + scale * v * f;
  }
  return model::EncodeFloats(values, spec.dtype);
}

Status WriteTensor(const TensorSpec& spec, const WeightWriterOptions& options, model::SafetensorsWriter* writer) {
  int64_t total = static_cast<int64_t>(spec.NumBytes() / DTypeSize(spec.dtype));
  int64_t num_chunks = (total + kChunkElements - 1) / kChunkElements;
  int64_t group = std::max(1, options.num_threads);
  for (int64_t first = 0; first < num_chunks; first += group) {
    int64_t n = std::min(group, num_chunks - first);
    std::vector<std::vector<std::byte>> chunks(static_cast<size_t>(n));
    if (n == 1) {
      chunks[0] = GenerateChunk(spec, first, options);
    } else {
      std::vector<std::thread> threads;
      for (int64_t k = 0; k < n; ++k) {
        threads.emplace_back([&, k] { chunks[k] = GenerateChunk(spec, first + k, options); });
      }
      for (std::thread& t : threads) t.join();
    }
    for (const auto& bytes : chunks) TANDEM_RETURN_IF_ERROR(writer->Append(bytes.data(), bytes.size()));
  }
  return Status::Ok();
}

std::vector<std::vector<TensorSpec>> PlanShards(const std::vector<TensorSpec>& specs, uint64_t max_shard_bytes) {
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t bytes = 0;
  for (const TensorSpec& spec : specs) {
    if (!shards.back().empty() && bytes + spec.NumBytes() > max_shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(spec);
    bytes += spec.NumBytes();
  }
  return shards;
}

std::string ShardName(size_t index, size_t count) {
  if (count == 1) return "model.safetensors";
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

Status WriteIndex(const std::string& dir, const std::vector<std::vector<TensorSpec>>& shards, uint64_t total_bytes) {
  nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", nlohmann::json::object()}};
  for (size_t i = 0; i < shards.size(); ++i) {
    for (const TensorSpec& spec : shards[i]) index["weight_map"][spec.name] = ShardName(i, shards.size());
  }
  std::ofstream out(dir + "/model.safetensors.index.json", std::ios::trunc);
  out << index.dump(2) << "\n";
  return out.good() ? Status::Ok() : UnavailableError(dir + "/model.safetensors.index.json: write failed");
}

}  // namespace

StatusOr<WeightWriterResult> WriteRandomWeights(const model::ModelConfig& config, const WeightWriterOptions& options,
                                                const std::string& dir) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  std::vector<TensorSpec> specs = model::ExpectedTensors(config);
  std::vector<std::vector<TensorSpec>> shards = PlanShards(specs, options.max_shard_bytes);
  WeightWriterResult result;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string path = dir + "/" + ShardName(i, shards.size());
    TANDEM_ASSIGN_OR_RETURN(auto writer, model::SafetensorsWriter::Create(path, shards[i]));
    for (const TensorSpec& spec : shards[i]) {
      TANDEM_RETURN_IF_ERROR(WriteTensor(spec, options, writer.get()));
      result.num_parameters += spec.NumBytes() / DTypeSize(spec.dtype);
    }
    TANDEM_RETURN_IF_ERROR(writer->Finish());
    result.num_bytes += writer->data_bytes();
  }
  result.num_files = static_cast<int>(shards.size());
  if (shards.size() > 1) TANDEM_RETURN_IF_ERROR(WriteIndex(dir, shards, result.num_bytes));
  return result;
}

}  // namespace tandem::tools
