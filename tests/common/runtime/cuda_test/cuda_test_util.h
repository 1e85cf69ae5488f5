// Helpers for the CudaBackend tests: the Hugging Face golden fixtures, a model
// + cache on any backend, and the comparisons (max relative error per row as in
// tests/common/runtime/golden_test.cc, top-1 agreement).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/weights.h"
#include "common/runtime/backend.h"
#include "common/runtime/cuda_backend.h"
#include "common/runtime/llama_model.h"
#include "tests/common/runtime/golden_data.h"

namespace tandem::runtime::testing {

// Skips the test, visibly, when there is no usable GPU.
#define TANDEM_SKIP_WITHOUT_GPU()                          \
  do {                                                     \
    if (::tandem::runtime::testing::NoGpu()) {             \
      GTEST_SKIP() << "no CUDA device: skipping GPU test"; \
    }                                                      \
  } while (0)
bool NoGpu();

std::unique_ptr<CudaBackend> MakeCudaBackend(const CudaBackendOptions& options = {});

// `weights` with every tensor rounded to bf16 (served as F32): what the CUDA backend
// stores, so the CPU fp32 backend over it computes the same function in higher precision.
class Bf16RoundedWeights : public model::ModelWeights {
 public:
  explicit Bf16RoundedWeights(const model::ModelWeights& weights) : weights_(weights) {}
  StatusOr<model::TensorView> Get(const std::string& name) const override;
  bool Contains(const std::string& name) const override { return weights_.Contains(name); }
  std::vector<std::string> Names() const override { return weights_.Names(); }

 private:
  const model::ModelWeights& weights_;
  mutable std::map<std::string, std::vector<float>> rounded_;
};

// A model and a KV cache of `num_blocks` blocks on `backend`.
struct ModelOn {
  ModelOn(Backend* backend, const model::ModelConfig& config, const model::ModelWeights& weights, int block_size,
          int num_blocks, int max_num_tokens = 256);
  std::vector<float> Run(const std::vector<SeqChunk>& chunks);
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<PagedKvCache> cache;
};

// max_v |ours - ref| / max_v |ref| over one row.
double RowRelError(const float* ours, const float* ref, size_t n);
int Argmax(const float* row, size_t n);
// True when ours and ref pick the same top-1 token, or when ref's top two are within
// `tie` * max|ref| (a tie at the tolerance, where either token is right).
bool SameTop1OrTie(const float* ours, const float* ref, size_t n, double tie);

// Greedy generation of `steps` tokens after prefilling `prompt` (one sequence); the
// logits row of every step goes to `logits` when given.
std::vector<int32_t> Greedy(ModelOn& m, const std::vector<int32_t>& prompt, int steps, int vocab,
                            std::vector<float>* logits = nullptr);

}  // namespace tandem::runtime::testing
