// grammar_mask_bench: microseconds per FillNextTokenMask over random generations with the Llama 3
// vocabulary (128256 ids), per response format: cold (first generation, empty caches) and warm
// (later generations of the same format), mean / p50 / p99, and the ratio to the 50 us target.
// Usage: grammar_mask_bench [tokenizer.json] (default: the test data of
// tests/common/tokenizer/setup_test_data.sh under $TANDEM_DEPS_DIR or ./.deps).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "common/grammar/grammar_matcher.h"
#include "tests/common/grammar/test_schemas.h"
#include "tests/common/grammar/test_util.h"

namespace tandem::grammar {
namespace {

constexpr double kTargetUs = 50.0;
constexpr int kWarmGenerations = 8;

struct Stats {
  double mean = 0, p50 = 0, p99 = 0;
};

Stats Summarize(std::vector<double> us) {
  Stats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.mean = std::accumulate(us.begin(), us.end(), 0.0) / us.size();
  s.p50 = us[us.size() / 2];
  s.p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  return s;
}

// One generation; appends the time of each mask fill (us) to *times.
int Generate(const std::shared_ptr<TokenGrammar>& grammar, const testing::TestVocab& tv, int seed,
             std::vector<double>* times) {
  std::mt19937 rng(seed);
  GrammarMatcher matcher(grammar, tv.end_tokens);
  std::vector<uint32_t> mask(MaskWords(tv.vocab->size()));
  int steps = 0;
  for (; steps < 1500 && !matcher.IsTerminated(); ++steps) {
    const auto t0 = std::chrono::steady_clock::now();
    matcher.FillNextTokenMask(mask);
    times->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    const TokenId t = testing::PickToken(mask, *tv.vocab, tv.end_tokens, steps, 300, rng);
    if (t < 0 || !matcher.AcceptToken(t).ok()) {
      std::fprintf(stderr, "generation failed at step %d\n", steps);
      return steps;
    }
  }
  return steps;
}

int Main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : testing::Llama3TokenizerPath();
  if (path.empty()) {
    std::fprintf(stderr, "Llama 3 tokenizer.json not found: pass its path or run "
                         "tests/common/tokenizer/setup_test_data.sh\n");
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const testing::TestVocab tv = testing::Llama3Vocab(path);
  std::printf("vocabulary: %d ids, %d trie nodes, built in %.0f ms\n", tv.vocab->size(),
              tv.vocab->trie().num_nodes(),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  const std::vector<std::string> names = {"json_object", "person", "tool_call", "event", "nested",
                                          "any_of_objects", "recursive_tree", "array_of_objects",
                                          "additional_true", "string_bounds", "enum_unicode", "list_of_anyof"};
  std::printf("%-18s %6s %10s %10s %9s %9s %9s %8s\n", "format", "steps", "cold_us", "warm_us", "warm_p50",
              "warm_p99", "all_p99", "warm/50");
  std::vector<double> all_cold, all_warm;
  for (const auto& format : testing::TestFormats()) {
    if (std::find(names.begin(), names.end(), format.name) == names.end()) continue;
    auto grammar = Grammar::Compile(format.spec);
    if (!grammar.ok()) return 1;
    auto token_grammar = TokenGrammar::Create(*grammar, tv.vocab);
    std::vector<double> cold, warm;
    int steps = Generate(token_grammar, tv, 0, &cold);
    for (int seed = 1; seed <= kWarmGenerations; ++seed) steps += Generate(token_grammar, tv, seed, &warm);
    const Stats c = Summarize(cold), w = Summarize(warm);
    std::vector<double> both = cold;
    both.insert(both.end(), warm.begin(), warm.end());
    std::printf("%-18s %6d %10.1f %10.1f %9.1f %9.1f %9.1f %8.2f\n", format.name.c_str(), steps, c.mean, w.mean,
                w.p50, w.p99, Summarize(both).p99, w.mean / kTargetUs);
    all_cold.insert(all_cold.end(), cold.begin(), cold.end());
    all_warm.insert(all_warm.end(), warm.begin(), warm.end());
  }
  const Stats c = Summarize(all_cold), w = Summarize(all_warm);
  std::printf("ALL cold: mean %.1f us p50 %.1f p99 %.1f (%.2fx target) | warm: mean %.1f us p50 %.1f p99 %.1f "
              "(%.2fx target)\n",
              c.mean, c.p50, c.p99, c.mean / kTargetUs, w.mean, w.p50, w.p99, w.mean / kTargetUs);
  return 0;
}

}  // namespace
}  // namespace tandem::grammar

int main(int argc, char** argv) { return tandem::grammar::Main(argc, argv); }
