#include "tests/common/runtime/cuda_test/cuda_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/cuda/cuda_status.h"

namespace tandem::runtime::testing {

StatusOr<model::TensorView> Bf16RoundedWeights::Get(const std::string& name) const {
  TANDEM_ASSIGN_OR_RETURN(model::TensorView view, weights_.Get(name));
  if (view.dtype != DType::kF32) return view;  // bf16 / f16 checkpoints are already narrow
  std::vector<float>& r = rounded_[name];
  r.resize(view.num_bytes / 4);
  std::memcpy(r.data(), view.data, r.size() * 4);
  for (float& x : r) x = BF16ToF32(F32ToBF16(x));
  view.data = reinterpret_cast<const std::byte*>(r.data());
  return view;
}

bool NoGpu() { return cuda::DeviceCount() == 0; }

std::unique_ptr<CudaBackend> MakeCudaBackend(const CudaBackendOptions& options) {
  auto b = CudaBackend::Create(options);
  TANDEM_CHECK(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

ModelOn::ModelOn(Backend* backend, const model::ModelConfig& config, const model::ModelWeights& weights, int block_size,
                 int num_blocks, int max_num_tokens) {
  RuntimeOptions options;
  options.kv_block_size = block_size;
  options.max_num_tokens = max_num_tokens;
  options.max_num_seqs = 16;
  options.max_logits_rows = max_num_tokens;
  auto m = LlamaModel::Create(config, weights, backend, options);
  TANDEM_CHECK(m.ok()) << m.status().ToString();
  model = std::move(m).value();
  auto c = PagedKvCache::Create(backend, model->KvLayoutFor(num_blocks));
  TANDEM_CHECK(c.ok()) << c.status().ToString();
  cache = std::make_unique<PagedKvCache>(std::move(c).value());
}

std::vector<float> ModelOn::Run(const std::vector<SeqChunk>& chunks) {
  auto out = model->ForwardToHost(chunks, *cache);
  TANDEM_CHECK(out.ok()) << out.status().ToString();
  return std::move(out).value();
}

double RowRelError(const float* ours, const float* ref, size_t n) {
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::abs(static_cast<double>(ours[i]) - ref[i]);
    max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
    max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
  }
  return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

int Argmax(const float* row, size_t n) { return static_cast<int>(std::max_element(row, row + n) - row); }

bool SameTop1OrTie(const float* ours, const float* ref, size_t n, double tie) {
  const int a = Argmax(ours, n), b = Argmax(ref, n);
  if (a == b) return true;
  double max_ref = 0.0;
  for (size_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
  return ref[b] - ref[a] <= tie * max_ref;
}

std::vector<int32_t> Greedy(ModelOn& m, const std::vector<int32_t>& prompt, int steps, int vocab,
                            std::vector<float>* all_logits) {
  const int bs = m.cache->layout().block_size;
  const int blocks = (static_cast<int>(prompt.size()) + steps + bs - 1) / bs;
  std::vector<BlockId> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<int32_t> out;
  auto logits = m.Run({{.tokens = prompt, .start_position = 0, .block_table = table, .want_logits = true}});
  out.push_back(Argmax(logits.data(), vocab));
  if (all_logits != nullptr) all_logits->assign(logits.begin(), logits.end());
  for (int i = 1; i < steps; ++i) {
    const TokenId t = out.back();
    logits = m.Run({{.tokens = {&t, 1},
                     .start_position = static_cast<int>(prompt.size()) + i - 1,
                     .block_table = table,
                     .want_logits = true}});
    out.push_back(Argmax(logits.data(), vocab));
    if (all_logits != nullptr) all_logits->insert(all_logits->end(), logits.begin(), logits.end());
  }
  return out;
}

}  // namespace tandem::runtime::testing
