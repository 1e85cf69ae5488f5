#include "common/runtime/op_checks.h"

#include <fmt/format.h>

#include <initializer_list>
#include <string_view>

namespace tandem::runtime {
namespace {

Status Bad(std::string_view op, std::string_view what, const Tensor& t) {
  return InvalidArgumentError(fmt::format("{}: bad {} {}", op, what, t.DebugString()));
}

// True when t is defined, has `dtype` and exactly `dims` (-1 matches anything).
bool Is(const Tensor& t, DType dtype, std::initializer_list<int64_t> dims) {
  if (!t.defined() || t.dtype != dtype || t.ndim != static_cast<int>(dims.size())) return false;
  int i = 0;
  for (int64_t d : dims) {
    if (d >= 0 && t.shape[i] != d) return false;
    ++i;
  }
  return true;
}

Status CheckPool(std::string_view op, const Tensor& pool, const kv_cache::KvLayout& layout, int layer, DType act) {
  TANDEM_RETURN_IF_ERROR(layout.Validate());
  if (layout.dtype != act) {
    return InvalidArgumentError(
        fmt::format("{}: KV dtype {} differs from activations {}", op, DTypeName(layout.dtype), DTypeName(act)));
  }
  if (!pool.defined() || pool.dtype != layout.dtype || pool.NumBytes() < layout.TotalBytes()) {
    return Bad(op, "kv pool for " + layout.DebugString(), pool);
  }
  if (layer < 0 || layer >= layout.num_layers) {
    return InvalidArgumentError(fmt::format("{}: layer {} out of range", op, layer));
  }
  return Status::Ok();
}

}  // namespace

Status CheckEmbedding(const Tensor& ids, const Tensor& table, const Tensor& out, DType act) {
  if (!Is(ids, DType::kI32, {-1})) return Bad("Embedding", "ids", ids);
  if (!Is(table, act, {-1, -1})) return Bad("Embedding", "table", table);
  if (!Is(out, act, {ids.shape[0], table.shape[1]}) && !Is(out, DType::kF32, {ids.shape[0], table.shape[1]})) {
    return Bad("Embedding", "out", out);
  }
  return Status::Ok();
}

Status CheckRmsNorm(const RmsNormParams& p, DType act) {
  if (!Is(p.x, act, {-1, -1}) && !Is(p.x, DType::kF32, {-1, -1})) return Bad("RmsNorm", "x", p.x);
  int64_t rows = p.x.shape[0], dim = p.x.shape[1];
  if (!Is(p.weight, act, {dim})) return Bad("RmsNorm", "weight", p.weight);
  if (!Is(p.out, act, {rows, dim})) return Bad("RmsNorm", "out", p.out);
  if (p.residual.defined()) {
    if (!Is(p.residual, p.x.dtype, {rows, dim})) return Bad("RmsNorm", "residual", p.residual);
    if (p.residual.data == p.out.data || p.residual.data == p.x.data) {
      return Bad("RmsNorm", "residual (aliases x or out)", p.residual);
    }
  }
  if (p.out.data == p.x.data && p.out.dtype != p.x.dtype) return Bad("RmsNorm", "out (aliases an fp32 x)", p.out);
  if (!(p.eps > 0.0f)) return InvalidArgumentError("RmsNorm: eps must be positive");
  return Status::Ok();
}

Status CheckLinear(const LinearParams& p, DType act) {
  if (!Is(p.x, act, {-1, -1})) return Bad("Linear", "x", p.x);
  if (!Is(p.weight, act, {-1, p.x.shape[1]})) return Bad("Linear", "weight", p.weight);
  const int64_t n = p.x.shape[0], out_features = p.weight.shape[0];
  if (p.bias.defined() && !Is(p.bias, act, {out_features})) return Bad("Linear", "bias", p.bias);
  const int64_t out_cols = p.silu_mul ? out_features / 2 : out_features;
  if (!Is(p.out, act, {n, out_cols}) && !Is(p.out, DType::kF32, {n, out_cols})) return Bad("Linear", "out", p.out);
  if (p.out.data == p.x.data) return Bad("Linear", "out (aliases x)", p.out);
  if (p.accumulate && p.out.dtype != DType::kF32) return Bad("Linear", "out (accumulate needs F32)", p.out);
  if (p.silu_mul) {
    if (out_features % 2 != 0 || p.accumulate || p.out.dtype != act) {
      return Bad("Linear", "silu_mul (an even number of gate/up rows, out in the compute dtype)", p.weight);
    }
    if (!Is(p.scratch, act, {n, out_features})) return Bad("Linear", "scratch", p.scratch);
  }
  return Status::Ok();
}

Status CheckRopeKvWrite(const RopeKvWriteParams& p, DType act) {
  const auto& l = p.layout;
  TANDEM_RETURN_IF_ERROR(CheckPool("RopeKvWrite", p.kv_pool, l, p.layer, act));
  if (!Is(p.q_out, act, {-1, -1, l.head_dim}) || p.q_out.shape[1] % l.num_kv_heads != 0) {
    return Bad("RopeKvWrite", "q_out", p.q_out);
  }
  const int64_t n = p.q_out.shape[0], heads = p.q_out.shape[1];
  if (!Is(p.qkv, act, {n, (heads + 2 * l.num_kv_heads) * l.head_dim})) return Bad("RopeKvWrite", "qkv", p.qkv);
  if (p.q_norm.defined() != p.k_norm.defined()) {
    return InvalidArgumentError("RopeKvWrite: set both q_norm and k_norm or neither");
  }
  if (p.q_norm.defined()) {
    if (!Is(p.q_norm, act, {l.head_dim})) return Bad("RopeKvWrite", "q_norm", p.q_norm);
    if (!Is(p.k_norm, act, {l.head_dim})) return Bad("RopeKvWrite", "k_norm", p.k_norm);
    if (!(p.norm_eps > 0.0f)) return InvalidArgumentError("RopeKvWrite: norm_eps must be positive");
  }
  if (!Is(p.positions, DType::kI32, {n})) return Bad("RopeKvWrite", "positions", p.positions);
  if (!Is(p.slot_mapping, DType::kI64, {n})) return Bad("RopeKvWrite", "slot_mapping", p.slot_mapping);
  if (l.head_dim % 2 != 0) return InvalidArgumentError("RopeKvWrite: head_dim must be even");
  return Status::Ok();
}

Status CheckPagedAttention(const PagedAttentionParams& p, DType act) {
  const auto& l = p.layout;
  TANDEM_RETURN_IF_ERROR(CheckPool("PagedAttention", p.kv_pool, l, p.layer, act));
  if (!Is(p.q, act, {-1, -1, l.head_dim})) return Bad("PagedAttention", "q", p.q);
  if (p.q.shape[1] % l.num_kv_heads != 0) return Bad("PagedAttention", "q heads", p.q);
  if (!Is(p.out, act, {p.q.shape[0], p.q.shape[1], l.head_dim})) return Bad("PagedAttention", "out", p.out);
  if (p.num_seqs < 0 || p.max_query_len < 0 || p.max_context_len < p.max_query_len) {
    return InvalidArgumentError("PagedAttention: inconsistent num_seqs / max_query_len / max_context_len");
  }
  int64_t s = p.num_seqs;
  if (!Is(p.query_start, DType::kI32, {s + 1})) return Bad("PagedAttention", "query_start", p.query_start);
  if (!Is(p.context_lens, DType::kI32, {s})) return Bad("PagedAttention", "context_lens", p.context_lens);
  if (!Is(p.block_tables, DType::kI32, {s, -1}) || p.block_tables.shape[1] * l.block_size < p.max_context_len) {
    return Bad("PagedAttention", "block_tables", p.block_tables);
  }
  if (p.workspace.defined() && p.workspace.dtype != DType::kU8) return Bad("PagedAttention", "workspace", p.workspace);
  return Status::Ok();
}

Status CheckSiluAndMul(const Tensor& gate_up, const Tensor& out, DType act) {
  if (!Is(gate_up, act, {-1, -1}) || gate_up.shape[1] % 2 != 0) return Bad("SiluAndMul", "gate_up", gate_up);
  if (!Is(out, act, {gate_up.shape[0], gate_up.shape[1] / 2})) return Bad("SiluAndMul", "out", out);
  return Status::Ok();
}

Status CheckGatherRows(const Tensor& src, const Tensor& indices, const Tensor& out) {
  if (!Is(src, src.dtype, {-1, -1})) return Bad("GatherRows", "src", src);
  if (!Is(indices, DType::kI32, {-1})) return Bad("GatherRows", "indices", indices);
  if (!Is(out, src.dtype, {indices.shape[0], src.shape[1]})) return Bad("GatherRows", "out", out);
  return Status::Ok();
}

}  // namespace tandem::runtime
