// CudaBackend::SampleTokens against the host Sampler (the CPU path):
//  - greedy, with and without each penalty, min_tokens masks, NaN logits, ids
//    outside the vocabulary and a long prompt: the same token exactly, and the
//    logits left on the device equal Sampler::ProcessLogits bit for bit (NaN
//    may stay where the host has -inf: greedy batches skip the NaN pass);
//  - a row with no token left fails alone (greedy and sampled batches);
//  - temperature sampling with top-k / top-p / min-p / penalties: frequencies
//    over many seeds against the filtered softmax computed here from the
//    documented semantics (chi-square at a 1e-6 false-alarm rate, nothing
//    outside the kept set); the host Sampler's frequencies pass the same check;
//  - the same (seed, output count) gives the same token at any batch position;
//  - logprobs (token and top k, with penalties, logit_bias, masks and ties)
//    equal the host reference within 1e-4.
// Every check takes a Backend, so the CPU path runs the same assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/runtime/cpu_backend.h"
#include "common/runtime/sampler.h"
#include "tests/common/runtime/cuda_test/cuda_test_util.h"

namespace tandem::runtime::testing {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One row's request, owning its token lists.
struct Row {
  SamplingParams params;
  std::vector<TokenId> prompt, output, eos;
  uint64_t seed = 0;
  std::vector<uint32_t> mask;  // structured output's allowed tokens; empty: none
  SampleRequest Request() const { return SampleRequest{&params, prompt, output, eos, seed, mask}; }
};

struct Sampled {
  std::vector<SampledToken> out;
  std::vector<float> logits_after;  // the device's logits after the call
};

// Uploads `logits` [rows.size(), vocab] to `backend` and samples every row.
Sampled Sample(Backend& backend, const std::vector<float>& logits, int vocab, const std::vector<Row>& rows) {
  const int64_t n = static_cast<int64_t>(rows.size());
  auto buffer = backend.Allocate(DType::kF32, {n, vocab});
  TANDEM_CHECK(buffer.ok()) << buffer.status().ToString();
  TANDEM_CHECK_OK(backend.CopyToDevice(logits.data(), logits.size() * sizeof(float), buffer->tensor()));
  std::vector<SampleRequest> requests;
  for (const Row& r : rows) requests.push_back(r.Request());
  Sampled s;
  s.out.resize(rows.size());
  TANDEM_CHECK_OK(backend.SampleTokens(buffer->tensor(), requests, s.out));
  s.logits_after.resize(logits.size());
  TANDEM_CHECK_OK(backend.CopyToHost(buffer->tensor(), s.logits_after.data(), logits.size() * sizeof(float)));
  return s;
}

// A permutation of evenly spaced values in [-8, 8): no ties, gaps far above fp32 rounding.
std::vector<float> DistinctRow(int vocab, std::mt19937& rng) {
  std::vector<int> rank(vocab);
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng);
  std::vector<float> row(vocab);
  for (int i = 0; i < vocab; ++i) row[i] = -8.0f + 16.0f * static_cast<float>(rank[i]) / static_cast<float>(vocab);
  return row;
}

// The `count` ids with the largest logits, best first.
std::vector<TokenId> Best(const float* row, int vocab, int count) {
  std::vector<TokenId> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(), [&](TokenId a, TokenId b) { return row[a] > row[b]; });
  ids.resize(count);
  return ids;
}

// The greedy cases for logits `row`; `hot` are its best ids.
std::vector<Row> GreedyRows(int vocab, const std::vector<TokenId>& hot, std::mt19937& rng) {
  std::vector<Row> rows(15);
  for (Row& r : rows) {
    r.params.temperature = 0.0f;
    r.prompt = {hot[0], hot[3], hot[3], hot[5], -1, vocab, vocab + 5, hot[9]};
    r.output = {hot[1], hot[0], hot[1], hot[1], hot[7], vocab + 2};
    r.eos = {hot[0]};
  }
  rows[1].params.repetition_penalty = 1.3f;
  rows[2].params.repetition_penalty = 0.7f;
  rows[3].params.presence_penalty = 1.5f;
  rows[4].params.frequency_penalty = 0.9f;
  rows[5].params.frequency_penalty = -1.2f;
  rows[5].params.presence_penalty = 0.4f;
  rows[6].params.repetition_penalty = 1.2f;
  rows[6].params.presence_penalty = 0.3f;
  rows[6].params.frequency_penalty = 0.2f;
  rows[7].params.min_tokens = 9;  // eos (the best) and stop id hot[1] masked
  rows[7].params.stop_token_ids = {hot[1], vocab + 9};
  rows[8].params.min_tokens = 6;  // reached: nothing masked
  rows[8].params.stop_token_ids = {hot[1]};
  rows[9].params.min_tokens = 9;
  rows[9].params.ignore_eos = true;  // eos stays, stop id masked
  rows[9].params.stop_token_ids = {hot[0], hot[2]};
  rows[9].eos = {hot[1]};
  rows[10].params.repetition_penalty = 1.5f;  // NaN logits (set by the caller)
  rows[11].params.min_tokens = 9;             // only masked ids are finite (caller): no token
  rows[11].params.stop_token_ids = {hot[2]};
  rows[12].params.presence_penalty = 0.5f;    // every logit NaN (caller): no token
  rows[13].params.repetition_penalty = 1.1f;  // long prompt
  rows[13].prompt.resize(100000);
  std::uniform_int_distribution<TokenId> any(0, vocab - 1);
  for (TokenId& t : rows[13].prompt) t = any(rng);
  rows[13].prompt[777] = hot[0];
  rows[14].params.repetition_penalty = 1.5f;  // empty lists: nothing to penalize
  rows[14].params.presence_penalty = 1.0f;
  rows[14].prompt.clear();
  rows[14].output.clear();
  return rows;
}

// Host value `h` (Sampler::ProcessLogits) equals device value `d`, bit for bit up to
// NaN on the device where the host has -inf.
bool SameLogit(float h, float d) { return h == d || (h == kNegInf && std::isnan(d)); }

// Greedy (and, with `mixed`, one sampled row that moves the batch onto the sampler
// kernel) against Sampler, row by row.
void CheckGreedy(Backend& backend, int vocab, bool mixed) {
  std::mt19937 rng(vocab * 7 + mixed);
  std::vector<std::vector<float>> raw;
  std::vector<Row> rows;
  std::vector<std::vector<TokenId>> hot;  // each row's best ids before NaN / -inf go in
  for (int i = 0; i < 15; ++i) {
    raw.push_back(DistinctRow(vocab, rng));
    hot.push_back(Best(raw.back().data(), vocab, 10));
    rows.push_back(GreedyRows(vocab, hot.back(), rng)[i]);
  }
  for (int k : {0, 2, 4}) raw[10][hot[10][k]] = std::nanf("");
  for (int v = 0; v < vocab; ++v) {
    if (v != rows[11].params.stop_token_ids[0] && v != rows[11].eos[0]) raw[11][v] = kNegInf;
    raw[12][v] = std::nanf("");
  }
  if (mixed) {
    raw.push_back(DistinctRow(vocab, rng));
    Row r = rows[6];
    r.params.temperature = 0.9f;
    r.params.top_k = 50;
    r.seed = 42;
    rows.push_back(r);
  }
  std::vector<float> logits;
  for (const auto& r : raw) logits.insert(logits.end(), r.begin(), r.end());
  Sampled got = Sample(backend, logits, vocab, rows);

  Sampler sampler;
  int changed = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleRequest request = rows[i].Request();
    std::vector<float> processed = raw[i];
    Sampler::ProcessLogits(processed, request);
    if (backend.device() == Device::kCuda) {
      int differ = 0;
      for (int v = 0; v < vocab; ++v) differ += !SameLogit(processed[v], got.logits_after[i * vocab + v]);
      EXPECT_EQ(differ, 0) << "row " << i << ": logits after penalties differ from ProcessLogits";
    }
    if (rows[i].params.temperature != 0.0f) {
      ASSERT_TRUE(got.out[i].status.ok()) << got.out[i].status.ToString();
      const std::vector<TokenId> top = Best(processed.data(), vocab, 50);
      EXPECT_NE(std::find(top.begin(), top.end(), got.out[i].token), top.end()) << "outside top-k";
      continue;
    }
    StatusOr<TokenId> want = sampler.Sample(raw[i], request);
    ASSERT_EQ(got.out[i].status.ok(), want.ok()) << "row " << i << ": " << got.out[i].status.ToString();
    if (!want.ok()) continue;
    EXPECT_EQ(got.out[i].token, *want) << "row " << i << ", vocab " << vocab;
    changed += i >= 1 && i <= 10 && *want != hot[i][0];
  }
  EXPECT_FALSE(got.out[11].status.ok());
  EXPECT_FALSE(got.out[12].status.ok());
  EXPECT_GE(changed, 6) << "the penalties and masks should move most argmaxes";
}

// The distribution a draw follows for processed `logits`, straight from the semantics in
// sampling_params.h (independent of Sampler's code). `margin` gets how far (relative) the
// closest top-p / min-p decision is from its threshold: a tiny margin would make the
// expected set depend on rounding.
std::vector<double> Filtered(const std::vector<float>& logits, const SamplingParams& p, double* margin) {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(logits.size()); ++i) {
    if (logits[i] != kNegInf) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  const double mx = logits[order[0]];
  std::vector<double> w(logits.size(), 0.0);
  for (int i : order) w[i] = std::exp((logits[i] - mx) / p.temperature);
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(p.top_k);
  *margin = 1.0;
  if (p.top_p < 1.0f) {
    double sum = 0, cum = 0;
    for (int i : order) sum += w[i];
    const double target = p.top_p * sum;
    size_t n = 0;
    while (n < order.size() && (n == 0 || cum < target)) cum += w[order[n++]];
    *margin = std::min(*margin, (cum - target) / sum);
    if (n > 1) *margin = std::min(*margin, (target - (cum - w[order[n - 1]])) / sum);
    order.resize(n);
  }
  std::vector<double> probs(logits.size(), 0.0);
  double total = 0;
  for (int i : order) {
    if (p.min_p > 0.0f) *margin = std::min(*margin, std::fabs(w[i] - p.min_p));
    if (w[i] >= p.min_p) total += (probs[i] = w[i]);
  }
  for (double& x : probs) x /= total;
  return probs;
}

// Chi-square of `counts` against `probs` (bins with under 5 expected draws pooled), at a
// 1e-6 false-alarm rate (Wilson-Hilferty); nothing may land where probs is 0.
void ExpectFollows(const std::vector<int>& counts, const std::vector<double>& probs, int draws,
                   const std::string& what) {
  double stat = 0, pooled_expected = 0, tv = 0;
  int pooled_count = 0, bins = 0, outside = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    tv += std::fabs(counts[i] / static_cast<double>(draws) - probs[i]) / 2;
    if (probs[i] == 0.0) {
      outside += counts[i];
      continue;
    }
    const double expected = probs[i] * draws;
    if (expected < 5) {
      pooled_expected += expected;
      pooled_count += counts[i];
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++bins;
  }
  if (pooled_expected > 0) {
    stat += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  EXPECT_EQ(outside, 0) << what << ": draws outside the kept set";
  const double df = std::max(bins - 1, 1), z = 4.75;  // one-sided 1e-6
  const double a = 2.0 / (9.0 * df);
  const double critical = df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
  std::printf("%s: chi2 %.1f (df %.0f, bound %.1f), total variation %.4f\n", what.c_str(), stat, df, critical, tv);
  EXPECT_LT(stat, critical) << what;
}

struct DistCase {
  const char* name;
  int vocab;
  float sigma;  // logits ~ N(0, sigma)
  SamplingParams params;
  bool with_tokens;  // prompt and output name the best ids (for the penalties)
  int draws;
};

SamplingParams Params(float temperature, int top_k, float top_p, float min_p, float repetition = 1.0f,
                      float presence = 0.0f, float frequency = 0.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = repetition;
  p.presence_penalty = presence;
  p.frequency_penalty = frequency;
  return p;
}

// Draws `c.draws` tokens from one logits row under as many seeds, in batches.
void CheckDistribution(Backend& backend, const DistCase& c) {
  std::mt19937 rng(c.vocab + 3);
  std::normal_distribution<float> dist(0.f, c.sigma);
  std::vector<float> row(c.vocab);
  for (float& v : row) v = dist(rng);
  Row base;
  base.params = c.params;
  if (c.with_tokens) {
    const std::vector<TokenId> hot = Best(row.data(), c.vocab, 6);
    base.prompt = {hot[0], hot[2], hot[4]};
    base.output = {hot[1], hot[1], hot[3], hot[0]};
  }
  std::vector<float> processed = row;
  Sampler::ProcessLogits(processed, base.Request());
  double margin = 0;
  const std::vector<double> probs = Filtered(processed, c.params, &margin);
  ASSERT_GT(margin, 1e-4) << c.name << ": a filter threshold sits on a token (pick other data)";

  const int per_call = std::max(1, std::min(c.draws, (32 << 20) / c.vocab));
  std::vector<int> counts(c.vocab, 0);
  for (int done = 0; done < c.draws;) {
    const int n = std::min(per_call, c.draws - done);
    std::vector<Row> rows(n, base);
    std::vector<float> logits;
    logits.reserve(static_cast<size_t>(n) * c.vocab);
    for (int k = 0; k < n; ++k) {
      rows[k].seed = 0x5eed0000ull + done + k;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    Sampled s = Sample(backend, logits, c.vocab, rows);
    for (const SampledToken& t : s.out) {
      ASSERT_TRUE(t.status.ok()) << t.status.ToString();
      ++counts[t.token];
    }
    done += n;
  }
  ExpectFollows(counts, probs, c.draws,
                std::string(c.name) + (backend.device() == Device::kCuda ? " (cuda)" : " (host)"));
}

class CudaSamplingDistributionTest : public ::testing::TestWithParam<DistCase> {};

TEST_P(CudaSamplingDistributionTest, FrequenciesFollowTheFilteredSoftmax) {
  const DistCase& c = GetParam();
  if (c.vocab <= 1000) {  // the host Sampler passes the same check (cheap at small vocabularies)
    CpuBackend cpu;
    CheckDistribution(cpu, c);
  }
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  CheckDistribution(*gpu, c);
}

INSTANTIATE_TEST_SUITE_P(
    Filters, CudaSamplingDistributionTest,
    ::testing::Values(DistCase{"temperature", 50, 1.5f, Params(0.7f, 0, 1.0f, 0.0f), false, 100000},
                      DistCase{"top_k", 50, 1.5f, Params(1.0f, 5, 1.0f, 0.0f), false, 100000},
                      DistCase{"top_p", 50, 1.5f, Params(1.0f, 0, 0.8f, 0.0f), false, 100000},
                      DistCase{"min_p", 50, 1.5f, Params(1.3f, 0, 1.0f, 0.1f), false, 100000},
                      DistCase{"all_filters", 50, 1.5f, Params(1.0f, 10, 0.9f, 0.05f), false, 100000},
                      DistCase{"penalties", 50, 1.5f, Params(0.9f, 0, 0.95f, 0.0f, 1.4f, 0.5f, 0.3f), true, 100000},
                      DistCase{"top_k_128256", 128256, 3.0f, Params(1.0f, 20, 1.0f, 0.0f), false, 8192},
                      DistCase{"top_p_128256", 128256, 3.0f, Params(0.8f, 0, 0.6f, 0.0f), false, 8192},
                      DistCase{"min_p_151936", 151936, 2.0f, Params(1.0f, 0, 1.0f, 0.2f, 1.2f), true, 8192}),
    [](const ::testing::TestParamInfo<DistCase>& info) { return std::string(info.param.name); });

class CudaSamplingGreedyTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaSamplingGreedyTest, EqualsHostSamplerWithPenaltiesAndMasks) {
  CpuBackend cpu;  // the same assertions on the default (host) path
  CheckGreedy(cpu, GetParam(), /*mixed=*/false);
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  CheckGreedy(*gpu, GetParam(), /*mixed=*/false);
  CheckGreedy(*gpu, GetParam(), /*mixed=*/true);
  EXPECT_EQ(gpu->live_buffers(), 0);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, CudaSamplingGreedyTest, ::testing::Values(97, 4099, 32000, 128256, 151936));

// The same request at different positions of two batches, next to other rows.
void CheckPositionIndependence(Backend& backend) {
  const int vocab = 128256, n = 24;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> x(vocab);
  for (float& v : x) v = dist(rng);
  auto batch = [&](int output_len, bool interleave, TokenId fill) {
    std::vector<Row> rows;
    std::vector<float> logits;
    for (int k = 0; k < n; ++k) {
      if (interleave) {  // another row first: greedy with a penalty, or sampled
        Row other;
        other.params.temperature = k % 2 ? 0.0f : 1.5f;
        other.params.repetition_penalty = 1.3f;
        other.output = {1, 2, 3};
        other.seed = 999;
        rows.push_back(other);
        for (int v = 0; v < vocab; ++v) logits.push_back(dist(rng));
      }
      Row r;
      r.output.assign(output_len, fill);
      r.seed = 7000 + (interleave ? n - 1 - k : k);  // reversed order in the interleaved batch
      rows.push_back(r);
      logits.insert(logits.end(), x.begin(), x.end());
    }
    Sampled s = Sample(backend, logits, vocab, rows);
    std::vector<TokenId> by_seed(n);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].seed < 7000) continue;
      TANDEM_CHECK(s.out[i].status.ok()) << s.out[i].status.ToString();
      by_seed[rows[i].seed - 7000] = s.out[i].token;
    }
    return by_seed;
  };
  const std::vector<TokenId> alone = batch(3, false, 11);
  EXPECT_EQ(batch(3, true, 11), alone) << "a token must depend only on (seed, output count)";
  EXPECT_EQ(batch(3, false, 12), alone) << "output contents do not feed the draw (no penalties)";
  const std::vector<TokenId> next = batch(4, false, 11);
  int moved = 0;
  for (int k = 0; k < n; ++k) moved += next[k] != alone[k];
  EXPECT_GE(moved, n / 2) << "the output count must feed the draw";
  EXPECT_GE(std::set<TokenId>(alone.begin(), alone.end()).size(), static_cast<size_t>(n / 2))
      << "the seed must feed the draw";
}

TEST(CudaSamplingTest, SameSeedAndStepGiveTheSameTokenAtAnyPosition) {
  CpuBackend cpu;
  CheckPositionIndependence(cpu);
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  CheckPositionIndependence(*gpu);
}

// Logprobs of a mixed batch against the host Sampler's (the CPU reference): the
// sampled token's logprob and the top entries' ids equal, logprobs within 1e-4.
// Rows: greedy with k 0 / 5 / 20, sampled at T 0.7 with k 20, penalties with a
// logit_bias, a min_tokens mask (-inf entries), many ties, thousands of equal best
// logits, and one without logprobs.
void CheckLogprobs(Backend& backend, int vocab) {
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<Row> rows(9);
  std::vector<float> logits;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<float> row(vocab);
    for (float& x : row) x = dist(rng);
    if (i == 6) {
      for (float& x : row) x = std::round(x);  // a handful of values: ties everywhere
    }
    if (i == 8) {  // thousands of equal best logits: more candidates than the kernel's fast path holds
      for (int v = 0; v < vocab; ++v) row[v] = v % 2048 < 64 ? 10.f : 0.f;
    }
    logits.insert(logits.end(), row.begin(), row.end());
    rows[i].params.temperature = 0.0f;
    rows[i].seed = 100 + i;
    rows[i].eos = {2};
  }
  rows[0].params.logprobs = 0;
  rows[1].params.logprobs = 5;
  rows[2].params.logprobs = 20;
  rows[3].params.logprobs = 20;
  rows[3].params.temperature = 0.7f;
  rows[3].params.top_p = 0.9f;
  rows[4].params.logprobs = 7;
  rows[4].params.repetition_penalty = 1.4f;
  rows[4].params.presence_penalty = 0.5f;
  rows[4].prompt = {1, 3, 5};
  rows[4].output = {5, 9, 9};
  rows[4].params.logit_bias = {{11, 6.0f}, {12, -100.0f}, {static_cast<TokenId>(vocab - 1), 2.5f}};
  logits[4 * vocab + 11] = 11.f;  // + 6 is above every N(0, 2) draw
  logits[4 * vocab + 12] = 30.f;  // - 100: below all
  rows[5].params.logprobs = 20;
  rows[5].params.min_tokens = 4;
  rows[5].params.stop_token_ids = {7};
  logits[5 * vocab + 2] = 40.f;  // eos and stop id 7 best, but masked: -inf logprobs
  logits[5 * vocab + 7] = 39.f;
  rows[6].params.logprobs = 20;
  // rows[7]: no logprobs
  rows[8].params.logprobs = 20;
  Sampled s = Sample(backend, logits, vocab, rows);
  Sampler oracle;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(s.out[i].status.ok()) << "row " << i << ": " << s.out[i].status.ToString();
    const SampleRequest request = rows[i].Request();
    ASSERT_TRUE(oracle.Sample(std::span<const float>(logits.data() + i * vocab, vocab), request).ok());
    if (rows[i].params.logprobs < 0) {
      EXPECT_TRUE(s.out[i].logprobs.top.empty());
      continue;
    }
    // The logprob of the token this backend sampled, by the reference.
    const SampledLogprobs want = oracle.Logprobs(rows[i].params, s.out[i].token);
    const SampledLogprobs& got = s.out[i].logprobs;
    EXPECT_NEAR(got.logprob, want.logprob, 1e-4) << "row " << i << " token " << s.out[i].token;
    ASSERT_EQ(got.top.size(), want.top.size()) << "row " << i;
    for (size_t j = 0; j < want.top.size(); ++j) {
      EXPECT_EQ(got.top[j].token, want.top[j].token) << "row " << i << " entry " << j;
      if (std::isinf(want.top[j].logprob)) {
        EXPECT_EQ(got.top[j].logprob, want.top[j].logprob) << "row " << i << " entry " << j;
      } else {
        EXPECT_NEAR(got.top[j].logprob, want.top[j].logprob, 1e-4) << "row " << i << " entry " << j;
      }
    }
  }
  EXPECT_EQ(s.out[4].logprobs.top[0].token, 11) << "logit_bias +6 makes token 11 the best";
  for (const TokenLogprob& t : s.out[4].logprobs.top) EXPECT_NE(t.token, 12);
  EXPECT_NE(s.out[5].token, 2);
  EXPECT_NE(s.out[5].token, 7);
}

TEST(CudaSamplingTest, LogprobsEqualTheHostReference) {
  CpuBackend cpu;
  CheckLogprobs(cpu, 4099);
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  for (int vocab : {97, 4099, 128256, 151936}) CheckLogprobs(*gpu, vocab);
  EXPECT_EQ(gpu->live_buffers(), 0);
}

// A mask allowing exactly `allowed`.
std::vector<uint32_t> MaskOf(int vocab, const std::vector<TokenId>& allowed) {
  std::vector<uint32_t> mask((vocab + 31) / 32, 0u);
  for (TokenId t : allowed) mask[t / 32] |= 1u << (t % 32);
  return mask;
}

bool Allowed(const std::vector<uint32_t>& mask, TokenId t) { return t >= 0 && (mask[t / 32] >> (t % 32) & 1u) != 0; }

// Structured-output masks (rows with and without, greedy and sampled, with penalties and
// logprobs) against Sampler: the same greedy picks and logits, every pick allowed.
void CheckTokenMask(Backend& backend, int vocab, bool compare_logits) {
  std::mt19937 rng(vocab + 5);
  std::vector<Row> rows(8);
  std::vector<float> logits;
  for (Row& r : rows) {
    std::vector<float> row = DistinctRow(vocab, rng);
    logits.insert(logits.end(), row.begin(), row.end());
    r.params.temperature = 0.0f;
    r.eos = {1};
  }
  std::vector<TokenId> some;  // about 1 % of the vocabulary, never the best of any row by design below
  std::uniform_int_distribution<TokenId> any(0, vocab - 1);
  for (int i = 0; i < std::max(3, vocab / 100); ++i) some.push_back(any(rng));
  rows[0].mask = MaskOf(vocab, some);
  rows[1].mask = MaskOf(vocab, {some[0], some[1], some[2]});
  rows[1].params.temperature = 1.0f;
  rows[1].seed = 7;
  // rows[2]: no mask
  rows[3].mask = MaskOf(vocab, {static_cast<TokenId>(vocab - 1)});  // only the last id (the last word's edge)
  rows[4].mask = MaskOf(vocab, some);
  rows[4].params.logprobs = 5;
  rows[5].mask = MaskOf(vocab, some);
  rows[5].params.repetition_penalty = 1.3f;
  rows[5].params.logit_bias = {{some[1], 50.0f}};  // biased to the top, and allowed: picked
  rows[5].prompt = {some[0], some[2]};
  rows[6].mask = MaskOf(vocab, {1, some[0]});  // eos allowed by the mask but masked by min_tokens
  rows[6].params.min_tokens = 3;
  logits[6 * vocab + 1] = 100.f;
  rows[7].mask = MaskOf(vocab, {});  // nothing allowed: this row fails alone
  Sampled s = Sample(backend, logits, vocab, rows);
  Sampler oracle;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleRequest request = rows[i].Request();
    std::vector<float> want(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
    Sampler::ProcessLogits(want, request);
    if (i == 7) {
      EXPECT_EQ(s.out[i].status.code(), StatusCode::kInvalidArgument) << "an all-masked row has no token";
      continue;
    }
    ASSERT_TRUE(s.out[i].status.ok()) << "vocab " << vocab << " row " << i << ": " << s.out[i].status.ToString();
    if (!rows[i].mask.empty()) {
      EXPECT_TRUE(Allowed(rows[i].mask, s.out[i].token)) << "row " << i;
    }
    if (rows[i].params.temperature == 0.0f) {
      StatusOr<TokenId> host = oracle.Sample(std::span<const float>(logits.data() + i * vocab, vocab), request);
      ASSERT_TRUE(host.ok());
      EXPECT_EQ(s.out[i].token, *host) << "vocab " << vocab << " row " << i;
      if (compare_logits) {
        for (int v = 0; v < vocab; ++v) {
          ASSERT_TRUE(SameLogit(want[v], s.logits_after[i * vocab + v])) << "row " << i << " token " << v;
        }
      }
    }
    if (rows[i].params.logprobs >= 0) {
      const SampledLogprobs ref = oracle.Logprobs(rows[i].params, s.out[i].token);
      EXPECT_NEAR(s.out[i].logprobs.logprob, ref.logprob, 1e-4);
      ASSERT_EQ(s.out[i].logprobs.top.size(), ref.top.size());
      for (size_t j = 0; j < ref.top.size(); ++j) EXPECT_EQ(s.out[i].logprobs.top[j].token, ref.top[j].token);
    }
  }
  EXPECT_EQ(s.out[3].token, vocab - 1);
  EXPECT_EQ(s.out[5].token, some[1]);
  EXPECT_EQ(s.out[6].token, some[0]);
}

TEST(CudaSamplingTest, TokenMasksEqualTheHostReference) {
  CpuBackend cpu;
  CheckTokenMask(cpu, 1001, false);
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  for (int vocab : {97, 1001, 4099, 128256, 151936}) CheckTokenMask(*gpu, vocab, true);
  EXPECT_EQ(gpu->live_buffers(), 0);
}

// Prompt logprobs (raw log-softmax at each row's next prompt token, and the top k) on the GPU
// against the host's Sampler::RowLogprobs, through Backend::PromptLogprobs on both.
void CheckPromptLogprobs(Backend& backend, int vocab, int k) {
  std::mt19937 rng(vocab + k);
  const int rows = 9;
  std::vector<float> logits;
  std::vector<TokenId> tokens;
  std::uniform_int_distribution<TokenId> any(0, vocab - 1);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row = DistinctRow(vocab, rng);
    logits.insert(logits.end(), row.begin(), row.end());
    tokens.push_back(any(rng));
  }
  auto buffer = backend.Allocate(DType::kF32, {rows, vocab});
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(backend.CopyToDevice(logits.data(), logits.size() * sizeof(float), buffer->tensor()).ok());
  std::vector<SampledLogprobs> got(rows);
  ASSERT_TRUE(backend.PromptLogprobs(buffer->tensor(), tokens, k, got).ok());
  for (int r = 0; r < rows; ++r) {
    const SampledLogprobs want =
        Sampler::RowLogprobs(std::span<const float>(logits).subspan(static_cast<size_t>(r) * vocab, vocab), 0.0f,
                             tokens[r], k);
    EXPECT_NEAR(got[r].logprob, want.logprob, 1e-4) << "vocab " << vocab << " row " << r;
    ASSERT_EQ(got[r].top.size(), want.top.size());
    for (size_t j = 0; j < want.top.size(); ++j) {
      EXPECT_EQ(got[r].top[j].token, want.top[j].token) << "vocab " << vocab << " row " << r << " top " << j;
      EXPECT_NEAR(got[r].top[j].logprob, want.top[j].logprob, 1e-4);
    }
  }
}

TEST(CudaSamplingTest, PromptLogprobsEqualTheHostReference) {
  CpuBackend cpu;
  CheckPromptLogprobs(cpu, 1001, 5);
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  for (int vocab : {97, 4099, 128256}) {
    for (int k : {0, 5, 20}) CheckPromptLogprobs(*gpu, vocab, k);
  }
  EXPECT_EQ(gpu->live_buffers(), 0);
}

TEST(CudaSamplingTest, AllMaskedRowFailsAloneInASampledBatch) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  const int vocab = 1001;
  std::mt19937 rng(9);
  std::vector<float> logits;
  std::vector<Row> rows(4);
  for (int i = 0; i < 4; ++i) {
    std::vector<float> row = DistinctRow(vocab, rng);
    if (i == 1) std::fill(row.begin(), row.end(), kNegInf);
    if (i == 2) std::fill(row.begin(), row.end(), std::nanf(""));
    logits.insert(logits.end(), row.begin(), row.end());
    rows[i].params.temperature = i == 3 ? 0.0f : 0.8f;
    rows[i].params.top_p = 0.9f;
    rows[i].seed = i;
  }
  Sampled s = Sample(*gpu, logits, vocab, rows);
  EXPECT_TRUE(s.out[0].status.ok());
  EXPECT_EQ(s.out[1].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.out[2].status.code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.out[3].status.ok());
  EXPECT_EQ(s.out[3].token, Best(logits.data() + 3 * vocab, vocab, 1)[0]);
}

TEST(CudaSamplingTest, RefusedInsideAGraphStep) {
  TANDEM_SKIP_WITHOUT_GPU();
  auto gpu = MakeCudaBackend();
  {
    auto buffer = gpu->Allocate(DType::kF32, {1, 16});
    ASSERT_TRUE(buffer.ok());
    SamplingParams params;
    std::vector<SampleRequest> requests = {SampleRequest{.params = &params}};
    std::vector<SampledToken> out(1);
    ASSERT_TRUE(gpu->BeginGraphStep().ok());
    EXPECT_EQ(gpu->SampleTokens(buffer->tensor(), requests, out).code(), StatusCode::kFailedPrecondition);
    gpu->CancelGraphStep();
    EXPECT_TRUE(gpu->SampleTokens(buffer->tensor(), requests, out).ok());
  }
  EXPECT_EQ(gpu->live_buffers(), 0);
}

}  // namespace
}  // namespace tandem::runtime::testing
