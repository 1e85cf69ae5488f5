// Layout: one candidate deployment the planner sizes: x prefill and y decode
// nodes behind one router (xPyD), or N colocated nodes (each prefills its own
// requests). One node is one GPU. Constraint: what limits a layout's rate.
// Thread rule: plain value types.
#pragma once

#include <string>

namespace tandem::planner {

struct Layout {
  int prefill_nodes = 0;
  int decode_nodes = 0;
  int colocated_nodes = 0;  // > 0: a colocated layout (then the other two are 0)

  bool colocated() const { return colocated_nodes > 0; }
  int Gpus() const { return colocated() ? colocated_nodes : prefill_nodes + decode_nodes; }
  // "2P3D" or "4C" (colocated).
  std::string Name() const {
    return colocated() ? std::to_string(colocated_nodes) + "C"
                       : std::to_string(prefill_nodes) + "P" + std::to_string(decode_nodes) + "D";
  }
  bool operator==(const Layout&) const = default;
};

enum class Constraint {
  kNone,
  kPrefillCompute,    // prompts queue on the prefill nodes (or a colocated node's prefill share)
  kDecodeStepTime,    // the decode step (TPOT) outgrows the SLO, or the batch cannot keep up
  kDecodeKvCapacity,  // decode KV blocks run out
  kDecodeBatchSlots,  // scheduler.max_num_seqs running + reserved sequences
  kTransfer,          // the KV handoff path
};

inline const char* ConstraintName(Constraint c) {
  switch (c) {
    case Constraint::kNone: return "none";
    case Constraint::kPrefillCompute: return "prefill compute";
    case Constraint::kDecodeStepTime: return "decode step time";
    case Constraint::kDecodeKvCapacity: return "decode KV capacity";
    case Constraint::kDecodeBatchSlots: return "decode batch slots";
    case Constraint::kTransfer: return "transfer";
  }
  return "?";
}

// Latency percentiles of a layout at one rate, seconds. TPOT: a request's mean
// time between output tokens.
struct LatencySummary {
  double ttft_p50 = 0;
  double ttft_p90 = 0;
  double tpot_p50 = 0;
  double tpot_p90 = 0;
};

}  // namespace tandem::planner
