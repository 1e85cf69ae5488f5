// Helpers for engine tests: the HF golden fixture model, and a driver that
// steps an engine on the test thread until its requests end.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/model/safetensors_file.h"
#include "common/runtime/cpu_backend.h"

namespace tandem::engine::testing {

inline std::string GoldenDir(const std::string& family) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/data/golden/" + family;
}

inline std::vector<TokenId> ReadI64(const std::string& dir, const std::string& name) {
  auto file = model::SafetensorsFile::Open(dir + "/golden.safetensors");
  TANDEM_CHECK(file.ok()) << file.status().ToString();
  auto t = (*file)->Get(name);
  TANDEM_CHECK(t.ok()) << name;
  std::vector<TokenId> ids(t->num_bytes / 8);
  for (size_t i = 0; i < ids.size(); ++i) {
    int64_t v;
    std::memcpy(&v, t->data + 8 * i, 8);
    ids[i] = static_cast<TokenId>(v);
  }
  return ids;
}

inline EngineConfig SmallConfig(const std::string& dir) {
  EngineConfig c;
  c.model_dir = dir;
  c.model_name = "golden";
  c.num_device_blocks = 64;
  c.num_host_blocks = 64;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_prefill_chunk_tokens = 32;
  c.scheduler.max_num_seqs = 16;
  return c;
}

inline std::unique_ptr<Engine> MakeEngine(const EngineConfig& config) {
  auto engine = Engine::Create(config, std::make_unique<runtime::CpuBackend>());
  TANDEM_CHECK(engine.ok()) << engine.status().ToString();
  return std::move(*engine);
}

inline EngineRequest Greedy(RequestId id, std::vector<TokenId> prompt, int max_tokens,
                            std::string tenant = "t0") {
  EngineRequest r;
  r.id = id;
  r.tenant_salt = std::move(tenant);
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

struct Result {
  std::vector<TokenId> tokens;
  EngineOutput final;
};

// Steps the engine until every request in `ids` has finished.
inline std::map<RequestId, Result> RunToCompletion(Engine& engine, size_t expected, int max_steps = 10000) {
  std::map<RequestId, Result> results;
  size_t done = 0;
  for (int step = 0; step < max_steps && done < expected; ++step) {
    std::vector<EngineOutput> outputs;
    engine.StepOnce(&outputs);
    for (auto& out : outputs) {
      Result& r = results[out.id];
      r.tokens.insert(r.tokens.end(), out.tokens.begin(), out.tokens.end());
      if (out.finished) {
        r.final = out;
        ++done;
      }
    }
  }
  TANDEM_CHECK_EQ(done, expected);
  return results;
}

}  // namespace tandem::engine::testing
