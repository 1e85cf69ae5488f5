#include "tests/common/runtime/fake_weights.h"

#include <cstring>

#include "common/base/dtype.h"

namespace tandem::runtime::testing {

FakeWeights::FakeWeights(const model::ModelConfig& c, uint64_t seed, DType dtype)
    : dtype_(dtype), state_(seed * 0x9e3779b97f4a7c15ULL + 1) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t f = c.intermediate_size, v = c.vocab_size;
  Add("model.embed_tokens.weight", {v, h}, 0.0f, 1.0f);
  Add("model.norm.weight", {h}, 1.0f, 0.2f);
  if (!c.tie_word_embeddings) Add("lm_head.weight", {v, h}, 0.0f, 0.2f);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Add(p + "input_layernorm.weight", {h}, 1.0f, 0.2f);
    Add(p + "post_attention_layernorm.weight", {h}, 1.0f, 0.2f);
    Add(p + "self_attn.q_proj.weight", {q, h}, 0.0f, 0.25f);
    Add(p + "self_attn.k_proj.weight", {kv, h}, 0.0f, 0.25f);
    Add(p + "self_attn.v_proj.weight", {kv, h}, 0.0f, 0.25f);
    Add(p + "self_attn.o_proj.weight", {h, q}, 0.0f, 0.25f);
    if (c.attention_bias || c.family == model::ModelFamily::kQwen2) {
      Add(p + "self_attn.q_proj.bias", {q}, 0.0f, 0.2f);
      Add(p + "self_attn.k_proj.bias", {kv}, 0.0f, 0.2f);
      Add(p + "self_attn.v_proj.bias", {kv}, 0.0f, 0.2f);
    }
    if (c.qk_norm) {
      Add(p + "self_attn.q_norm.weight", {c.head_dim}, 1.0f, 0.2f);
      Add(p + "self_attn.k_norm.weight", {c.head_dim}, 1.0f, 0.2f);
    }
    Add(p + "mlp.gate_proj.weight", {f, h}, 0.0f, 0.25f);
    Add(p + "mlp.up_proj.weight", {f, h}, 0.0f, 0.25f);
    Add(p + "mlp.down_proj.weight", {h, f}, 0.0f, 0.2f);
  }
}

void FakeWeights::Add(const std::string& name, const std::vector<int64_t>& shape, float center, float spread) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> values(count);
  for (float& x : values) {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = static_cast<double>(state_ >> 11) * 0x1.0p-53;  // [0, 1)
    x = center + spread * static_cast<float>(2.0 * u - 1.0);
  }
  Set(name, shape, values);
}

void FakeWeights::Set(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& values) {
  Stored s{shape, dtype_, {}};
  if (dtype_ == DType::kBF16) {
    s.bytes.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t b = F32ToBF16(values[i]);
      std::memcpy(s.bytes.data() + 2 * i, &b, 2);
    }
  } else {
    s.bytes.resize(values.size() * 4);
    std::memcpy(s.bytes.data(), values.data(), s.bytes.size());
  }
  tensors_[name] = std::move(s);
}

StatusOr<model::TensorView> FakeWeights::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return NotFoundError("no tensor " + name);
  model::TensorView v;
  v.name = name;
  v.dtype = it->second.dtype;
  v.shape = it->second.shape;
  v.data = it->second.bytes.data();
  v.num_bytes = it->second.bytes.size();
  return v;
}

std::vector<std::string> FakeWeights::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

model::ModelConfig SmallConfig(const std::string& family) {
  model::ModelConfig c;
  c.vocab_size = 97;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 12;
  c.rms_norm_eps = 1e-5;
  c.max_position_embeddings = 256;
  if (family == "llama") {
    c.family = model::ModelFamily::kLlama;
    c.rope_theta = 500000.0;
    c.rope_scaling = {model::RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 32};
  } else if (family == "mistral") {
    c.family = model::ModelFamily::kMistral;
    c.num_kv_heads = 1;
  } else if (family == "qwen2") {
    c.family = model::ModelFamily::kQwen2;
    c.attention_bias = true;
    c.tie_word_embeddings = true;
    c.rope_theta = 1000000.0;
  } else {
    c.family = model::ModelFamily::kQwen3;
    c.qk_norm = true;
    c.num_kv_heads = 4;
    c.head_dim = 16;
  }
  return c;
}

}  // namespace tandem::runtime::testing
