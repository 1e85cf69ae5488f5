// tandem-make-model: writes a random-weight Llama-family model in Hugging Face
// format (config.json, generation_config.json, safetensors, tokenizer files).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "CLI/CLI.hpp"

#include "tools/make_model/presets.h"
#include "tools/make_model/tokenizer_files.h"
#include "tools/make_model/weight_writer.h"

namespace tandem::tools {
namespace {

namespace fs = std::filesystem;
using model::ModelConfig;

constexpr const char* kDescription = R"(Writes a model directory in Hugging Face format with random weights:
config.json, generation_config.json, model.safetensors (or shards plus
model.safetensors.index.json above --max-shard-size), and tokenizer files.

Start from a preset, then override any field. Without --tokenizer-dir every
preset gets the built-in tiny byte-level BPE tokenizer (500 ids, Llama-3-style
special tokens and chat template), and bos/eos ids follow it.

Output is deterministic for a given --seed (and does not depend on --threads).
Large models are streamed to disk, so memory use stays small.

Examples:
  tandem-make-model --preset tiny -o /tmp/tiny
  tandem-make-model --preset tiny --family qwen3 --tie-word-embeddings true -o /tmp/tiny-qwen3
  tandem-make-model --preset llama3-8b --tokenizer-dir ~/Llama-3.1-8B -o /tmp/l8b
  tandem-make-model --preset llama3-70b --num-layers 4 -o /tmp/l70b-4layers

Presets:
)";

struct Flags {
  std::string preset = "tiny";
  std::string output;
  std::string family;
  std::string dtype;
  std::string tokenizer_dir;
  std::string rope_scaling;
  std::string max_shard_size = "5GB";
  uint64_t seed = 0;
  int threads = 0;
  float std = 0.02f;
  bool force = false;
  // Shape overrides; applied only when given on the command line.
  int vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0, num_heads = 0;
  int num_kv_heads = 0, head_dim = 0, max_position_embeddings = 0, bos_token_id = 0, sliding_window = 0;
  double rope_theta = 0, rms_norm_eps = 0, rope_factor = 0, rope_low_freq = 0, rope_high_freq = 0;
  int rope_original_max = 0;
  bool tie_word_embeddings = false, attention_bias = false, qk_norm = false;
  std::vector<int> eos_token_ids;
};

StatusOr<uint64_t> ParseSize(const std::string& text) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    return InvalidArgumentError("bad size '" + text + "' (e.g. 5GB, 500MB, 2GiB)");
  }
  std::string unit = text.substr(pos);
  const std::pair<const char*, double> units[] = {{"", 1},     {"B", 1},        {"KB", 1e3},      {"MB", 1e6},
                                                  {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1 << 20}, {"GiB", 1 << 30}};
  for (const auto& [name, scale] : units) {
    if (unit == name && value > 0) return static_cast<uint64_t>(value * scale);
  }
  return InvalidArgumentError("bad size '" + text + "' (e.g. 5GB, 500MB, 2GiB)");
}

Status ApplyShapeOverrides(const CLI::App& app, const Flags& f, ModelConfig* c) {
  auto given = [&](const char* name) { return app.count(name) > 0; };
  if (!f.family.empty()) {
    TANDEM_ASSIGN_OR_RETURN(model::ModelFamily family, ParseFamily(f.family));
    ApplyFamily(family, c);
  }
  if (given("--vocab-size")) c->vocab_size = f.vocab_size;
  if (given("--hidden-size")) c->hidden_size = f.hidden_size;
  if (given("--intermediate-size")) c->intermediate_size = f.intermediate_size;
  if (given("--num-layers")) c->num_layers = f.num_layers;
  if (given("--num-heads")) c->num_heads = f.num_heads;
  if (given("--num-kv-heads")) c->num_kv_heads = f.num_kv_heads;
  if (given("--head-dim")) {
    c->head_dim = f.head_dim;
  } else if ((given("--hidden-size") || given("--num-heads")) && c->num_heads > 0) {
    c->head_dim = c->hidden_size / c->num_heads;
  }
  if (given("--max-position-embeddings")) c->max_position_embeddings = f.max_position_embeddings;
  if (given("--rope-theta")) c->rope_theta = f.rope_theta;
  if (given("--rms-norm-eps")) c->rms_norm_eps = f.rms_norm_eps;
  if (given("--tie-word-embeddings")) c->tie_word_embeddings = f.tie_word_embeddings;
  if (given("--attention-bias")) c->attention_bias = f.attention_bias;
  if (given("--qk-norm")) c->qk_norm = f.qk_norm;
  if (given("--sliding-window")) {
    if (c->family == model::ModelFamily::kLlama) {
      return InvalidArgumentError("--sliding-window needs --family mistral, qwen2 or qwen3");
    }
    c->sliding_window = f.sliding_window;
  }
  if (!f.dtype.empty()) {
    const std::pair<const char*, DType> dtypes[] = {{"bf16", DType::kBF16}, {"f16", DType::kF16}, {"f32", DType::kF32}};
    for (const auto& [name, dtype] : dtypes) {
      if (f.dtype == name) c->dtype = dtype;
    }
  }
  model::RopeScaling& r = c->rope_scaling;
  if (f.rope_scaling == "none") r = model::RopeScaling{};
  if (f.rope_scaling == "linear") r.type = model::RopeScalingType::kLinear;
  if (f.rope_scaling == "llama3") r.type = model::RopeScalingType::kLlama3;
  if (given("--rope-factor")) r.factor = f.rope_factor;
  if (given("--rope-low-freq-factor")) r.low_freq_factor = f.rope_low_freq;
  if (given("--rope-high-freq-factor")) r.high_freq_factor = f.rope_high_freq;
  if (given("--rope-original-max-position-embeddings")) r.original_max_position_embeddings = f.rope_original_max;
  return Status::Ok();
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("-o,--output", f.output, "Output directory (created if missing)")->required();
  app.add_option("-p,--preset", f.preset, "Starting shape (see Presets above)")->capture_default_str();
  app.add_option("--family", f.family,
                 "Architecture: llama|mistral|qwen2|qwen3 (qwen2 turns on q/k/v bias, "
                 "qwen3 turns on q/k norm)");
  app.add_option("--dtype", f.dtype, "Weight dtype: bf16|f16|f32 (default: the preset's)")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  app.add_option("--seed", f.seed, "Random seed")->capture_default_str();
  app.add_option("--std", f.std, "Std of the normal init of linear/embedding weights (norms are ~1.0)")
      ->capture_default_str();
  app.add_option("--tokenizer-dir", f.tokenizer_dir,
                 "Copy tokenizer files from this directory (for real-model "
                 "presets); default: write the built-in tiny tokenizer");
  app.add_option("--max-shard-size", f.max_shard_size, "Split weights into shards above this size (5GB, 500MB, ...)")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "Weight generator threads (0 = all cores)")->capture_default_str();
  app.add_flag("-f,--force", f.force, "Overwrite a directory that already holds a config.json");
  auto* shape = "Shape overrides";
  app.add_option("--vocab-size", f.vocab_size, "vocab_size")->group(shape);
  app.add_option("--hidden-size", f.hidden_size, "hidden_size")->group(shape);
  app.add_option("--intermediate-size", f.intermediate_size, "intermediate_size (FFN width)")->group(shape);
  app.add_option("--num-layers", f.num_layers, "num_hidden_layers (e.g. keep 4 of llama3-70b's 80)")->group(shape);
  app.add_option("--num-heads", f.num_heads, "num_attention_heads")->group(shape);
  app.add_option("--num-kv-heads", f.num_kv_heads, "num_key_value_heads (GQA)")->group(shape);
  app.add_option("--head-dim", f.head_dim, "head_dim (default hidden_size / num_heads)")->group(shape);
  app.add_option("--max-position-embeddings", f.max_position_embeddings, "max_position_embeddings")->group(shape);
  app.add_option("--rope-theta", f.rope_theta, "rope_theta")->group(shape);
  app.add_option("--rms-norm-eps", f.rms_norm_eps, "rms_norm_eps")->group(shape);
  app.add_option("--tie-word-embeddings", f.tie_word_embeddings, "true|false: lm_head shares embed_tokens")
      ->group(shape);
  app.add_option("--attention-bias", f.attention_bias, "true|false: q/k/v projection biases")->group(shape);
  app.add_option("--qk-norm", f.qk_norm, "true|false: per-head q/k RMSNorm (Qwen3)")->group(shape);
  app.add_option("--sliding-window", f.sliding_window, "sliding_window (Mistral/Qwen only)")->group(shape);
  app.add_option("--rope-scaling", f.rope_scaling, "none|linear|llama3")
      ->group(shape)
      ->check(CLI::IsMember({"none", "linear", "llama3"}));
  app.add_option("--rope-factor", f.rope_factor, "rope_scaling.factor")->group(shape);
  app.add_option("--rope-low-freq-factor", f.rope_low_freq, "llama3 low_freq_factor")->group(shape);
  app.add_option("--rope-high-freq-factor", f.rope_high_freq, "llama3 high_freq_factor")->group(shape);
  app.add_option("--rope-original-max-position-embeddings", f.rope_original_max,
                 "llama3 original_max_position_embeddings")
      ->group(shape);
  app.add_option("--bos-token-id", f.bos_token_id, "bos_token_id (default: from the tokenizer)")->group(shape);
  app.add_option("--eos-token-ids", f.eos_token_ids, "eos_token_id list (default: from the tokenizer)")->group(shape);
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return out.good() ? Status::Ok() : UnavailableError(path + ": write failed");
}

Status Run(const CLI::App& app, const Flags& f) {
  TANDEM_ASSIGN_OR_RETURN(ModelConfig config, PresetConfig(f.preset));
  TANDEM_RETURN_IF_ERROR(ApplyShapeOverrides(app, f, &config));
  TANDEM_ASSIGN_OR_RETURN(uint64_t max_shard_bytes, ParseSize(f.max_shard_size));
  std::error_code ec;
  fs::create_directories(f.output, ec);
  if (ec) return UnavailableError(f.output + ": cannot create: " + ec.message());
  if (fs::exists(fs::path(f.output) / "config.json") && !f.force) {
    return AlreadyExistsError(f.output + " already holds a model; pass --force to overwrite");
  }
  for (const char* stale : {"model.safetensors", "model.safetensors.index.json"})
    fs::remove(fs::path(f.output) / stale, ec);
  if (f.tokenizer_dir.empty()) {
    TANDEM_RETURN_IF_ERROR(WriteTinyTokenizer(f.output, &config));
  } else {
    TANDEM_RETURN_IF_ERROR(CopyTokenizer(f.tokenizer_dir, f.output, &config));
  }
  if (app.count("--bos-token-id")) config.bos_token_id = f.bos_token_id;
  if (app.count("--eos-token-ids")) config.eos_token_ids = f.eos_token_ids;
  TANDEM_RETURN_IF_ERROR(config.Validate());
  TANDEM_RETURN_IF_ERROR(WriteText(f.output + "/config.json", ModelConfigJson(config)));
  TANDEM_RETURN_IF_ERROR(WriteText(f.output + "/generation_config.json", GenerationConfigJson(config)));

  WeightWriterOptions options;
  options.seed = f.seed;
  options.std = f.std;
  options.max_shard_bytes = max_shard_bytes;
  options.num_threads = f.threads > 0 ? f.threads : std::max(1u, std::thread::hardware_concurrency());
  auto start = std::chrono::steady_clock::now();
  TANDEM_ASSIGN_OR_RETURN(WeightWriterResult result, WriteRandomWeights(config, options, f.output));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %s %s, %d layers, %.3f M parameters, %.3f GB in %d file(s), %.1f s\n", f.output.c_str(),
              config.architecture.c_str(), std::string(DTypeName(config.dtype)).c_str(), config.num_layers,
              result.num_parameters / 1e6, result.num_bytes / 1e9, result.num_files, seconds);
  return Status::Ok();
}

}  // namespace
}  // namespace tandem::tools

int main(int argc, char** argv) {
  using namespace tandem::tools;
  CLI::App app(std::string(kDescription) + DescribePresets(), "tandem-make-model");
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  tandem::Status status = Run(app, flags);
  if (!status.ok()) {
    std::fprintf(stderr, "tandem-make-model: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
