#include "tests/common/runtime/golden_data.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/base/check.h"
#include "common/model/safetensors_file.h"

namespace tandem::runtime::testing {
namespace {

std::unique_ptr<model::SafetensorsFile> OpenGolden(const std::string& dir) {
  auto file = model::SafetensorsFile::Open(dir + "/golden.safetensors");
  TANDEM_CHECK(file.ok()) << file.status().ToString();
  return std::move(file).value();
}

std::vector<int32_t> ReadIds(const model::SafetensorsFile& f, const std::string& name) {
  auto t = f.Get(name);
  TANDEM_CHECK(t.ok() && t->dtype == DType::kI64) << name;
  std::vector<int32_t> ids(t->num_bytes / 8);
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v;
    std::memcpy(&v, t->data + 8 * i, 8);
    ids[i] = static_cast<int32_t>(v);
  }
  return ids;
}

std::vector<float> ReadF32(const model::SafetensorsFile& f, const std::string& name) {
  auto t = f.Get(name);
  TANDEM_CHECK(t.ok() && t->dtype == DType::kF32) << name;
  std::vector<float> v(t->num_bytes / 4);
  std::memcpy(v.data(), t->data, t->num_bytes);
  return v;
}

}  // namespace

std::string GoldenDir(const std::string& family) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/data/golden/" + family;
}

std::vector<int32_t> ReadGoldenIds(const std::string& dir, const std::string& name) {
  return ReadIds(*OpenGolden(dir), name);
}

GoldenData::GoldenData(const std::string& family) {
  const std::string dir = GoldenDir(family);
  std::ifstream in(dir + "/config.json");
  TANDEM_CHECK(in.good()) << "missing fixture " << dir;
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = model::ParseModelConfig(text.str());
  TANDEM_CHECK(parsed.ok()) << parsed.status().ToString();
  config = *parsed;
  auto w = model::ModelWeights::Open(dir);
  TANDEM_CHECK(w.ok()) << w.status().ToString();
  weights = std::move(w).value();
  auto g = OpenGolden(dir);
  prompt = ReadIds(*g, "prompt_ids");
  decode = ReadIds(*g, "decode_ids");
  prefill_ref = ReadF32(*g, "prefill_logits");
  decode_ref = ReadF32(*g, "decode_logits");
  TANDEM_CHECK_EQ(prefill_ref.size(), prompt.size() * config.vocab_size);
  TANDEM_CHECK_EQ(decode_ref.size(), decode.size() * config.vocab_size);
}

}  // namespace tandem::runtime::testing
