// Helpers for engine tests: the HF golden fixture model, and a driver that
// steps an engine on the test thread until its requests end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/runtime/cpu_backend.h"
#include "tests/common/runtime/golden_data.h"

namespace tandem::engine::testing {

using runtime::testing::GoldenDir;
using runtime::testing::ReadGoldenIds;

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

inline EngineRequest Greedy(RequestId id, std::vector<TokenId> prompt, int max_tokens, std::string tenant = "t0") {
  EngineRequest r;
  r.id = id;
  r.tenant_salt = std::move(tenant);
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

// A seeded request at temperature 1 with every penalty on (all count output tokens).
inline EngineRequest SeededWithPenalties(RequestId id, std::vector<TokenId> prompt, int max_tokens, uint64_t seed) {
  EngineRequest r = Greedy(id, std::move(prompt), max_tokens);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.sampling.presence_penalty = 0.5f;
  r.sampling.frequency_penalty = 0.3f;
  r.sampling.repetition_penalty = 1.2f;
  return r;
}

// `request` as a router re-dispatches it after `done` output tokens: they extend the
// prompt and sample as output (num_output_tokens_in_prompt); max_tokens counts the rest.
inline EngineRequest Moved(EngineRequest request, RequestId id, const std::vector<TokenId>& done) {
  request.id = id;
  request.prompt_tokens.insert(request.prompt_tokens.end(), done.begin(), done.end());
  request.sampling.num_output_tokens_in_prompt = static_cast<int>(done.size());
  request.sampling.max_tokens -= static_cast<int>(done.size());
  return request;
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
