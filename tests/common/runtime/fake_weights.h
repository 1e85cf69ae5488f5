// In-memory ModelWeights with random values for a ModelConfig, under the
// Hugging Face tensor names, for runtime tests that need no files.
// Thread rule: immutable after construction.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/weights.h"

namespace tandem::runtime::testing {

class FakeWeights : public model::ModelWeights {
 public:
  // Random tensors for every weight `config` needs, stored as `dtype`
  // (F32 or BF16). Same seed, same values.
  FakeWeights(const model::ModelConfig& config, uint64_t seed, DType dtype = DType::kF32);

  StatusOr<model::TensorView> Get(const std::string& name) const override;
  bool Contains(const std::string& name) const override { return tensors_.count(name) != 0; }
  std::vector<std::string> Names() const override;

  // Replaces or adds a tensor (F32 values). For error-path tests.
  void Set(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values);
  void Remove(const std::string& name) { tensors_.erase(name); }

 private:
  struct Stored {
    std::vector<int64_t> shape;
    DType dtype;
    std::vector<std::byte> bytes;
  };
  void Add(const std::string& name, const std::vector<int64_t>& shape, float center, float spread);

  DType dtype_;
  uint64_t state_;
  std::map<std::string, Stored> tensors_;
};

// A small config of each family: "llama" (GQA, llama3 rope scaling),
// "mistral", "qwen2" (qkv bias, tied embeddings), "qwen3" (q/k norm).
model::ModelConfig SmallConfig(const std::string& family);

}  // namespace tandem::runtime::testing
