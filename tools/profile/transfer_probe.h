// MeasureTransferPath: the cost of moving one request's KV with the project's
// own kv_transfer code — a KvSender on one transport writing, layer after
// layer, into a KvReceiver's landing memory on another, control messages
// handed over in order as the nodes' RPC streams do — timed from the receiver's
// Open until both ends reported the session done. Requests of 1, 4, 16, ...
// blocks, with contiguous target blocks (one write per layer) and scattered
// ones (every other block: one write per block and layer), fitted as
// fixed + per_run × runs + bytes / bytes_per_second. Runs are the writes the
// sender actually posted (KvSenderStats::writes_posted).
// Thread rule: the calling thread owns both transports for the call.
#pragma once

#include <string>
#include <vector>

#include "common/kv_cache/kv_layout.h"
#include "kv_transfer/transport.h"
#include "planner/profile.h"

namespace tandem::tools {

struct TransferProbeOptions {
  int max_blocks = 256;  // largest request, in blocks (sizes 1, 4, 16, ... up to it)
  int repetitions = 5;   // timed sessions per point (median), after one warm-up
};

// `layout`: the engine's KV layout (its num_blocks is ignored; the probe sizes
// its own pools). `path` names the path (transport, options, memory, note); its
// points and fit are filled in. Both transports register host memory.
StatusOr<planner::TransferPath> MeasureTransferPath(kv_transfer::Transport& sender_transport,
                                                    kv_transfer::Transport& receiver_transport,
                                                    const kv_cache::KvLayout& layout,
                                                    const TransferProbeOptions& options, planner::TransferPath path);

// Each path of `transports` that the build has, measured: "local" (the in-process
// memcpy transport, both ends here), "ucx" (UCX over `ucx_transports`, host memory)
// and "cuda_ipc" (device memory of GPU `device_ordinal`) with the receiver in a
// second process, as between nodes (this program re-run with --transfer-peer:
// RunTransferPeer). The others (nccl: two GPUs), and the paths the build lacks,
// are named in `left_out` with the reason. `backend`: the engine's ("cuda" adds
// the host-staged path of a CUDA engine to left_out).
StatusOr<planner::TransferProfile> MeasureTransfers(const kv_cache::KvLayout& layout,
                                                    const std::vector<std::string>& transports,
                                                    const std::string& ucx_transports, const std::string& backend,
                                                    int device_ordinal, const TransferProbeOptions& options);

// Across processes both ends poll as the nodes' poll threads do (node::MaySpin):
// back to back, or every ~200 us for a CPU engine.
//
// The receiving process of a cross-process path: `args` after "--transfer-peer"
// (transport, spin|paced, UCX list or "-", device, host|device, then the pool's layout: layers,
// KV heads, head dim, block size, blocks, dtype). A KvReceiver over its own landing
// pool, driven by lines on stdin ("open ID N BLOCK...", "msg HEX", "exit"), answering
// on stdout ("ready", "target HEX", "tosender HEX", "done ID STATUS", "error WHY").
// Returns the exit status.
int RunTransferPeer(const std::vector<std::string>& args);

}  // namespace tandem::tools
