// CpuBackend ops against naive formulas written independently here (double
// precision, contiguous K/V, explicit pool index arithmetic).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "common/runtime/cpu_backend.h"
#include "common/runtime/rope.h"
#include "tests/common/runtime/test_util.h"

namespace tandem::runtime {
namespace {

using testing::MakeBuffer;
using testing::MaxRelError;
using testing::RandomVector;
using testing::ToHost;

// Pool index of (layer, block, kv, head, slot, d) written out from the layout
// comment: [layers, blocks, 2, heads, block_size, head_dim].
size_t PoolIndex(const kv_cache::KvLayout& l, int layer, int block, int kv, int head, int slot, int d) {
  return ((((static_cast<size_t>(layer) * l.num_blocks + block) * 2 + kv) * l.num_kv_heads + head) * l.block_size +
          slot) *
             l.head_dim +
         d;
}

kv_cache::KvLayout SmallLayout() {
  kv_cache::KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 2;
  l.head_dim = 8;
  l.block_size = 4;
  l.num_blocks = 12;
  l.dtype = DType::kF32;
  return l;
}

TEST(CpuOpsTest, RmsNormMatchesFormulaWithAndWithoutResidual) {
  CpuBackend b;
  const int rows = 3, dim = 10;
  auto x = RandomVector(rows * dim, 1), res = RandomVector(rows * dim, 2), w = RandomVector(dim, 3, 0.5f, 1.5f);
  Buffer xb = MakeBuffer(b, {rows, dim}, x), rb = MakeBuffer(b, {rows, dim}, res), wb = MakeBuffer(b, {dim}, w);
  Buffer out = MakeBuffer(b, {rows, dim}, std::vector<float>(rows * dim));
  ASSERT_TRUE(
      b.RmsNorm({.x = xb.tensor(), .residual = rb.tensor(), .weight = wb.tensor(), .out = out.tensor(), .eps = 1e-5f})
          .ok());
  std::vector<float> got = ToHost(b, out.tensor()), got_res = ToHost(b, rb.tensor());
  for (int r = 0; r < rows; ++r) {
    double ms = 0;
    for (int i = 0; i < dim; ++i) ms += std::pow(double(x[r * dim + i]) + res[r * dim + i], 2) / dim;
    for (int i = 0; i < dim; ++i) {
      double sum = double(x[r * dim + i]) + res[r * dim + i];
      EXPECT_NEAR(got_res[r * dim + i], sum, 1e-6);
      EXPECT_NEAR(got[r * dim + i], w[i] * sum / std::sqrt(ms + 1e-5), 1e-5);
    }
  }
  // In place, no residual.
  ASSERT_TRUE(
      b.RmsNorm({.x = xb.tensor(), .residual = Tensor(), .weight = wb.tensor(), .out = xb.tensor(), .eps = 1e-5f})
          .ok());
  std::vector<float> in_place = ToHost(b, xb.tensor());
  double ms = 0;
  for (int i = 0; i < dim; ++i) ms += double(x[i]) * x[i] / dim;
  EXPECT_NEAR(in_place[3], w[3] * x[3] / std::sqrt(ms + 1e-5), 1e-5);
}

TEST(CpuOpsTest, LinearSiluEmbeddingGather) {
  CpuBackend b;
  const int n = 3, in = 13, outf = 7;
  auto x = RandomVector(n * in, 4), w = RandomVector(outf * in, 5), bias = RandomVector(outf, 6);
  Buffer xb = MakeBuffer(b, {n, in}, x), wb = MakeBuffer(b, {outf, in}, w), bb = MakeBuffer(b, {outf}, bias);
  Buffer ob = MakeBuffer(b, {n, outf}, std::vector<float>(n * outf));
  ASSERT_TRUE(b.Linear({xb.tensor(), wb.tensor(), bb.tensor(), ob.tensor()}).ok());
  auto got = ToHost(b, ob.tensor());
  for (int r = 0; r < n; ++r) {
    for (int m = 0; m < outf; ++m) {
      double e = bias[m];
      for (int k = 0; k < in; ++k) e += double(x[r * in + k]) * w[m * in + k];
      EXPECT_NEAR(got[r * outf + m], e, 1e-5);
    }
  }
  // Accumulate: out += x * w^T + bias, one add onto what out held.
  auto prior = RandomVector(n * outf, 8);
  Buffer acc = MakeBuffer(b, {n, outf}, prior);
  ASSERT_TRUE(
      b.Linear({.x = xb.tensor(), .weight = wb.tensor(), .bias = bb.tensor(), .out = acc.tensor(), .accumulate = true})
          .ok());
  auto acc_h = ToHost(b, acc.tensor());
  for (int i = 0; i < n * outf; ++i) EXPECT_EQ(acc_h[i], prior[i] + got[i]) << i;
  // Wrong weight width is an error, not a crash.
  Buffer bad = MakeBuffer(b, {outf, in + 1}, std::vector<float>(outf * (in + 1)));
  EXPECT_EQ(b.Linear({xb.tensor(), bad.tensor(), Tensor(), ob.tensor()}).code(), StatusCode::kInvalidArgument);

  // SiluAndMul on the fused [gate | up] row: x's 13 columns hold gate (6) | up (6) | 1 unused, so use 12.
  auto gu = RandomVector(n * 12, 7);
  Buffer gate_up = MakeBuffer(b, {n, 12}, gu), act = MakeBuffer(b, {n, 6}, std::vector<float>(n * 6));
  ASSERT_TRUE(b.SiluAndMul(gate_up.tensor(), act.tensor()).ok());
  auto act_h = ToHost(b, act.tensor());
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < 6; ++i) {
      double g = gu[r * 12 + i], u = gu[r * 12 + 6 + i];
      EXPECT_NEAR(act_h[r * 6 + i], g / (1 + std::exp(-g)) * u, 1e-6);
    }
  }

  Buffer ids = MakeBuffer(b, {3}, std::vector<int32_t>{6, 0, 6});
  Buffer emb = MakeBuffer(b, {n, in}, std::vector<float>(n * in));
  ASSERT_TRUE(b.Embedding(ids.tensor(), wb.tensor().Reshape({outf, in}), emb.tensor()).ok());
  auto emb_h = ToHost(b, emb.tensor());
  EXPECT_EQ(emb_h[0], w[6 * in]);
  EXPECT_EQ(emb_h[in + 4], w[4]);
  Buffer bad_ids = MakeBuffer(b, {3}, std::vector<int32_t>{0, 7, 1});
  EXPECT_EQ(b.Embedding(bad_ids.tensor(), wb.tensor(), emb.tensor()).code(), StatusCode::kInvalidArgument);

  Buffer rows = MakeBuffer(b, {2}, std::vector<int32_t>{2, 0});
  Buffer picked = MakeBuffer(b, {2, in}, std::vector<float>(2 * in));
  ASSERT_TRUE(b.GatherRows(xb.tensor(), rows.tensor(), picked.tensor()).ok());
  auto picked_h = ToHost(b, picked.tensor());
  EXPECT_EQ(picked_h[0], x[2 * in]);
  EXPECT_EQ(picked_h[in + 5], x[5]);
}

// The Linear options on the CPU against naive formulas: silu_mul is Linear into scratch then
// SiluAndMul; accumulate adds the product onto out.
TEST(CpuOpsTest, LinearOptionsRunAsTheOpsInTurn) {
  CpuBackend b;
  const int n = 2, in = 9, ffn = 5, dim = 6;
  auto x = RandomVector(n * in, 11), w = RandomVector(2 * ffn * in, 12), w_o = RandomVector(dim * in, 13);
  auto prior = RandomVector(n * dim, 15);
  Buffer xb = MakeBuffer(b, {n, in}, x), wb = MakeBuffer(b, {2 * ffn, in}, w), wob = MakeBuffer(b, {dim, in}, w_o);
  Buffer scratch = MakeBuffer(b, {n, 2 * ffn}, std::vector<float>(n * 2 * ffn));
  Buffer act = MakeBuffer(b, {n, ffn}, std::vector<float>(n * ffn));
  ASSERT_TRUE(b.Linear({.x = xb.tensor(),
                        .weight = wb.tensor(),
                        .out = act.tensor(),
                        .silu_mul = true,
                        .scratch = scratch.tensor()})
                  .ok());
  auto act_h = ToHost(b, act.tensor());
  for (int r = 0; r < n; ++r)
    for (int f = 0; f < ffn; ++f) {
      double g = 0, u = 0;
      for (int k = 0; k < in; ++k) {
        g += double(x[r * in + k]) * w[f * in + k];
        u += double(x[r * in + k]) * w[(ffn + f) * in + k];
      }
      EXPECT_NEAR(act_h[r * ffn + f], g / (1 + std::exp(-g)) * u, 1e-4);
    }
  EXPECT_EQ(b.Linear({.x = xb.tensor(), .weight = wb.tensor(), .out = act.tensor(), .silu_mul = true}).code(),
            StatusCode::kInvalidArgument)
      << "silu_mul needs its scratch";

  Buffer res = MakeBuffer(b, {n, dim}, prior);
  ASSERT_TRUE(b.Linear({.x = xb.tensor(), .weight = wob.tensor(), .out = res.tensor(), .accumulate = true}).ok());
  auto res_h = ToHost(b, res.tensor());
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < dim; ++j) {
      double y = prior[r * dim + j];
      for (int k = 0; k < in; ++k) y += double(x[r * in + k]) * w_o[j * in + k];
      EXPECT_NEAR(res_h[r * dim + j], y, 1e-5);
    }
}

TEST(CpuOpsTest, RopeInvFreqDefaultLinearAndLlama3) {
  model::RopeScaling none;
  auto f = RopeInvFreq(8, 10000.0, none);
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ((*f)[i], 1.0 / std::pow(10000.0, 2.0 * i / 8));
  model::RopeScaling linear{model::RopeScalingType::kLinear, 4.0};
  auto fl = RopeInvFreq(8, 10000.0, linear);
  ASSERT_TRUE(fl.ok());
  EXPECT_FLOAT_EQ((*fl)[2], (*f)[2] / 4.0f);

  // llama3, written as Hugging Face does it (where-masks over all frequencies).
  model::RopeScaling l3{model::RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 64};
  const int dim = 32;
  const double theta = 500000.0;
  auto got = RopeInvFreq(dim, theta, l3);
  ASSERT_TRUE(got.ok());
  int scaled = 0, kept = 0, smoothed = 0;
  for (int i = 0; i < dim / 2; ++i) {
    double inv = 1.0 / std::pow(theta, 2.0 * i / dim);
    double wavelen = 2 * std::numbers::pi / inv;
    double low_wl = 64 / 1.0, high_wl = 64 / 4.0;
    double llama = wavelen > low_wl ? inv / 8.0 : inv;
    double smooth = (64 / wavelen - 1.0) / (4.0 - 1.0);
    double smoothed_inv = (1 - smooth) * llama / 8.0 + smooth * llama;
    bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
    double expected = medium ? smoothed_inv : llama;
    EXPECT_NEAR((*got)[i], expected, 1e-6 * expected) << i;
    scaled += wavelen > low_wl;
    kept += wavelen < high_wl;
    smoothed += medium;
  }
  EXPECT_GT(scaled, 0);  // the fixture exercises all three bands
  EXPECT_GT(kept, 0);
  EXPECT_GT(smoothed, 0);
  EXPECT_FALSE(RopeInvFreq(7, theta, none).ok());
  EXPECT_FALSE(RopeInvFreq(8, theta, {model::RopeScalingType::kLlama3, 8.0, 4.0, 1.0, 64}).ok());
}

class RopeKvWriteTest : public ::testing::TestWithParam<bool> {};  // param: with q/k norm

TEST_P(RopeKvWriteTest, MatchesHfRotateHalfAndPoolLayout) {
  const bool with_norm = GetParam();
  CpuBackend b;
  kv_cache::KvLayout l = SmallLayout();
  const int n = 4, heads = 4, kvh = l.num_kv_heads, d = l.head_dim, layer = 1, row = (heads + 2 * kvh) * d;
  auto qkv = RandomVector(n * row, 10);
  auto q_norm = RandomVector(d, 13, 0.5f, 1.5f), k_norm = RandomVector(d, 14, 0.5f, 1.5f);
  // Token 3 has slot -1: rotated q, but K/V not stored.
  std::vector<int32_t> positions = {0, 5, 33, 7};
  std::vector<int64_t> slots = {7 * 4 + 0, 2 * 4 + 1, 11 * 4 + 3, -1};
  Buffer qkv_b = MakeBuffer(b, {n, row}, qkv), pb = MakeBuffer(b, {n}, positions);
  Buffer qn = MakeBuffer(b, {d}, q_norm), kn = MakeBuffer(b, {d}, k_norm);
  auto sb = b.Allocate(DType::kI64, {n});
  ASSERT_TRUE(sb.ok() && b.CopyToDevice(slots.data(), n * 8, sb->tensor()).ok());
  Buffer q_out = MakeBuffer(b, {n, heads, d}, std::vector<float>(n * heads * d));
  auto pool = b.Allocate(DType::kF32, {static_cast<int64_t>(l.TotalBytes() / 4)});
  ASSERT_TRUE(pool.ok());
  RopeKvWriteParams p{.qkv = qkv_b.tensor(),
                      .q_out = q_out.tensor(),
                      .norm_eps = 1e-6f,
                      .positions = pb.tensor(),
                      .slot_mapping = sb->tensor(),
                      .kv_pool = pool->tensor(),
                      .layout = l,
                      .layer = layer,
                      .rope = {10000.0, {}}};
  if (with_norm) {
    p.q_norm = qn.tensor();
    p.k_norm = kn.tensor();
  }
  ASSERT_TRUE(b.RopeKvWrite(p).ok());
  auto q_h = ToHost(b, q_out.tensor()), pool_h = ToHost(b, pool->tensor());
  // Optional per-head RMSNorm, then HF: x * cos(emb) + rotate_half(x) * sin(emb), emb = cat(freqs, freqs),
  // rotate_half(x) = cat(-x2, x1).
  auto head = [&](const float* x, const std::vector<float>& w) {
    std::vector<double> y(x, x + d);
    if (with_norm) {
      double ms = 0;
      for (int j = 0; j < d; ++j) ms += double(x[j]) * x[j] / d;
      for (int j = 0; j < d; ++j) y[j] = w[j] * x[j] / std::sqrt(ms + 1e-6);
    }
    return y;
  };
  auto rope = [&](const std::vector<double>& x, int pos, int j) {
    double freq = pos / std::pow(10000.0, 2.0 * (j % (d / 2)) / d);
    double rot = j < d / 2 ? -x[j + d / 2] : x[j - d / 2];
    return x[j] * std::cos(freq) + rot * std::sin(freq);
  };
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < heads; ++h) {
      auto x = head(&qkv[t * row + h * d], q_norm);
      for (int j = 0; j < d; ++j) EXPECT_NEAR(q_h[(t * heads + h) * d + j], rope(x, positions[t], j), 2e-5);
    }
    if (slots[t] < 0) continue;
    for (int h = 0; h < kvh; ++h) {
      auto x = head(&qkv[t * row + (heads + h) * d], k_norm);
      int block = slots[t] / 4, slot = slots[t] % 4;
      for (int j = 0; j < d; ++j) {
        EXPECT_NEAR(pool_h[PoolIndex(l, layer, block, 0, h, slot, j)], rope(x, positions[t], j), 2e-5);
        EXPECT_EQ(pool_h[PoolIndex(l, layer, block, 1, h, slot, j)], qkv[t * row + (heads + kvh + h) * d + j]);
      }
    }
  }
  // Only the three stored slots of layer 1 are non-zero.
  size_t nonzero = 0;
  for (float x : pool_h) nonzero += x != 0.0f;
  EXPECT_EQ(nonzero, 3u * 2 * kvh * d);
}

INSTANTIATE_TEST_SUITE_P(Norm, RopeKvWriteTest, ::testing::Bool());

// Naive attention for one sequence with contiguous K/V [context_len, kv_heads, d].
std::vector<double> NaiveAttention(const std::vector<float>& q, int n, int heads, const std::vector<float>& k,
                                   const std::vector<float>& v, int context_len, int kv_heads, int d) {
  std::vector<double> out(n * heads * d, 0.0);
  for (int i = 0; i < n; ++i) {
    int pos = context_len - n + i;
    for (int h = 0; h < heads; ++h) {
      int kh = h / (heads / kv_heads);
      std::vector<double> s(pos + 1);
      double mx = -1e300, sum = 0;
      for (int j = 0; j <= pos; ++j) {
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += double(q[(i * heads + h) * d + e]) * k[(j * kv_heads + kh) * d + e];
        s[j] = dot / std::sqrt(double(d));
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j <= pos; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int j = 0; j <= pos; ++j) {
        for (int e = 0; e < d; ++e) out[(i * heads + h) * d + e] += s[j] / sum * v[(j * kv_heads + kh) * d + e];
      }
    }
  }
  return out;
}

TEST(CpuOpsTest, PagedAttentionMixedBatchMatchesNaiveSoftmax) {
  CpuBackend b;
  kv_cache::KvLayout l = SmallLayout();
  const int heads = 4, d = l.head_dim, layer = 1, kvh = l.num_kv_heads;
  // Three sequences: a decode at context_len 9, a prefill of 5 from 0, a chunk of 3 at context_len 11.
  struct Seq {
    int n, context_len;
    std::vector<int32_t> table;
  };
  std::vector<Seq> seqs = {{1, 9, {3, 10, 0}}, {5, 5, {6, 1}}, {3, 11, {11, 2, 8}}};
  auto pool = b.Allocate(DType::kF32, {static_cast<int64_t>(l.TotalBytes() / 4)});
  ASSERT_TRUE(pool.ok());
  std::vector<float> pool_h(l.TotalBytes() / 4, 0.0f);
  std::vector<std::vector<float>> ks, vs;
  std::vector<int32_t> query_start = {0}, context_lens, tables(3 * 3, -1);
  int total = 0;
  for (int s = 0; s < 3; ++s) {
    ks.push_back(RandomVector(seqs[s].context_len * kvh * d, 100 + s));
    vs.push_back(RandomVector(seqs[s].context_len * kvh * d, 200 + s));
    for (int j = 0; j < seqs[s].context_len; ++j) {
      for (int h = 0; h < kvh; ++h) {
        for (int e = 0; e < d; ++e) {
          int block = seqs[s].table[j / 4];
          pool_h[PoolIndex(l, layer, block, 0, h, j % 4, e)] = ks[s][(j * kvh + h) * d + e];
          pool_h[PoolIndex(l, layer, block, 1, h, j % 4, e)] = vs[s][(j * kvh + h) * d + e];
        }
      }
    }
    total += seqs[s].n;
    query_start.push_back(total);
    context_lens.push_back(seqs[s].context_len);
    std::copy(seqs[s].table.begin(), seqs[s].table.end(), tables.begin() + 3 * s);
  }
  ASSERT_TRUE(b.CopyToDevice(pool_h.data(), pool_h.size() * 4, pool->tensor()).ok());
  auto q = RandomVector(total * heads * d, 300, -2.0f, 2.0f);
  Buffer qb = MakeBuffer(b, {total, heads, d}, q), ob = MakeBuffer(b, {total, heads, d}, std::vector<float>(q.size()));
  Buffer qs = MakeBuffer(b, {4}, query_start), kl = MakeBuffer(b, {3}, context_lens);
  Buffer bt = MakeBuffer(b, {3, 3}, tables);
  PagedAttentionParams p{.q = qb.tensor(),
                         .out = ob.tensor(),
                         .kv_pool = pool->tensor(),
                         .layout = l,
                         .layer = layer,
                         .query_start = qs.tensor(),
                         .context_lens = kl.tensor(),
                         .block_tables = bt.tensor(),
                         .num_seqs = 3,
                         .max_query_len = 5,
                         .max_context_len = 11,
                         .scale = static_cast<float>(1.0 / std::sqrt(d))};
  ASSERT_TRUE(b.PagedAttention(p).ok());
  auto out = ToHost(b, ob.tensor());
  for (int s = 0; s < 3; ++s) {
    std::vector<float> qs_h(q.begin() + query_start[s] * heads * d, q.begin() + query_start[s + 1] * heads * d);
    auto expected = NaiveAttention(qs_h, seqs[s].n, heads, ks[s], vs[s], seqs[s].context_len, kvh, d);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(out[query_start[s] * heads * d + i], expected[i], 2e-6) << "seq " << s << " elem " << i;
    }
  }
  // A block id out of range is an error, not an out-of-bounds read.
  std::vector<int32_t> bad = tables;
  bad[0] = 12;
  Buffer bad_bt = MakeBuffer(b, {3, 3}, bad);
  p.block_tables = bad_bt.tensor();
  EXPECT_EQ(b.PagedAttention(p).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::runtime
