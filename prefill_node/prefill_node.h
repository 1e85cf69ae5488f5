// PrefillNode: the prefill role. Takes PrefillRequests from the router, runs
// each prompt through its engine as a one-token request (the request's
// sampling, max_tokens = 1), and streams the KV decode still needs layer by
// layer while the model computes, then sends KvDone(first token) to decode.
// Each request's progress is a PrefillHandoff (prefill_handoff.h); this class is the
// adapter that feeds it events and runs its actions.
//
// Where a layer leaves from (the KV source):
//   direct — the transport reaches the engine's own KV pool (device memory
//     with cuda_ipc/nccl, host memory on the CPU backend): after each layer's
//     ops the node marks a compute fence, and the poll thread hands the layer's
//     blocks to KvSender once it is ready. The engine holds the request's
//     blocks after it finishes (hold_kv_after_finish) until the sender lets go.
//   staged — a host-only transport (UCX) with device KV: after each layer's ops
//     the node queues copies of its blocks (one per run) into pinned,
//     transport-registered staging on a copy stream; the poll thread sends the
//     layer once the copy fence is ready. NodeConfig::kv_staging forces this.
// Either way layer l travels while layer l + 1 computes, and the compute
// stream never waits for the transfer.
//
// Threads: engine thread (observer: source preparation, layer fences; outputs),
// a PollThread owning the transport, KvSender and the per-request layer
// queues, the NodeHost's I/O threads, the router link thread. Jobs live in a
// RequestTable under mu_.
//
// Thread rule: Create/Stop from the owning thread; accessors thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/net/rpc_client.h"
#include "common/node/host_block_arena.h"
#include "common/node/node_config.h"
#include "common/node/node_host.h"
#include "common/node/poll_thread.h"
#include "common/node/request_table.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/transport.h"
#include "prefill_node/prefill_handoff.h"

namespace tandem::prefill_node {

using TransportFactory = std::function<StatusOr<std::unique_ptr<kv_transfer::Transport>>()>;

struct PrefillNodeOptions {
  node::NodeConfig config;
  // Builds the KV transport; unset: from config.transport.
  TransportFactory make_transport;
  // Model backend; unset: MakeBackend(config.engine.backend, config.engine.device).
  std::unique_ptr<runtime::Backend> backend;
};

struct PrefillNodeStats {
  int64_t requests = 0;        // requests not yet finished
  int64_t staging_in_use = 0;  // staging blocks held (staged source)
  int64_t sessions = 0;        // open sender sessions
  uint64_t bytes_sent = 0;     // KV bytes of successful transfers
};

class PrefillNode {
 public:
  static StatusOr<std::unique_ptr<PrefillNode>> Create(PrefillNodeOptions options);
  ~PrefillNode();  // Stop()
  void Stop();

  node::NodeHost& host() { return host_; }
  engine::Engine& engine() { return *engine_; }
  std::string address() const { return host_.address(); }
  // True when layers leave straight from the engine's pool (no staging).
  bool direct_source() const { return direct_; }
  PrefillNodeStats Stats();
  bool Idle();

 private:
  struct Request {
    Epoch epoch = 0;
    PrefillHandoff machine;
    std::string target;   // decode's KvTarget; empty until a PrefillTarget brings it (reservation_follows)
    int first_block = 0;  // first prompt block decode needs (until the target: 0)
    int num_blocks = 0;   // blocks decode needs (until the target: the prompt's)
    int prompt_len = 0;
    std::optional<runtime::SampledLogprobs> first_token_logprobs;  // when the request asked for logprobs
    std::vector<runtime::SampledLogprobs> prompt_logprobs;         // when it asked for prompt logprobs
    proto::StageTimes stage_times;  // prefill queue and compute (with the first token), the transfer tail (KvDone)
    Nanos first_token_at = 0;       // Clock::Real() when the first token came out
    bool trace_timing = false;      // PrefillRequest.trace_timing: log the stages at info
    std::vector<BlockId> source;  // staging ids (staged) or the prompt's device ids (direct)
    std::shared_ptr<net::RpcConnection> decode_conn;
  };
  using Retries = std::vector<std::function<void()>>;

  PrefillNode() = default;
  Status Init(PrefillNodeOptions options);
  Status InitTransfer(PrefillNodeOptions& options);

  void OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message, net::Responder responder);
  void OnPeerMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message);
  void HandlePrefill(const proto::PrefillRequest& prefill, net::Responder responder);
  void HandlePrefillTarget(const proto::PrefillTarget& target, net::Responder responder);
  // Takes decode's reservation: which prompt blocks it needs (the source narrowed to them
  // when the step already prepared the whole prompt) and where they go. REQUIRES: mu_ held.
  void SetTargetLocked(Request& r, std::string target, int first_block, int num_blocks);
  // The machine's kConnected once decode is ready for the KV: the connection is up and the
  // reservation known. REQUIRES: mu_ held.
  void ConnectedIfReadyLocked(uint64_t id, Request& r, Retries* retries);
  void OnConnected(uint64_t id, Epoch epoch, StatusOr<std::shared_ptr<net::RpcConnection>> conn);
  // Feeds `event` to the request and runs its actions. REQUIRES: mu_ held.
  void HandleLocked(uint64_t id, Request& r, const PrefillEvent& event, Retries* retries);
  void RunLocked(uint64_t id, Request& r, const PrefillActions& actions, Retries* retries);
  // Feeds `event` to (id, epoch) if it is still there, then runs waiting retries.
  void Handle(uint64_t id, Epoch epoch, const PrefillEvent& event);
  // ForwardObserver hooks (engine thread).
  bool OnStepBegin(const scheduler::SchedulerOutput& step);
  void OnLayer(int layer);
  void OnStepEnd(const Status& status);
  // Poll thread: queues a layer that is ready at `fence`; sends what is ready.
  void OnLayerQueued(uint64_t id, Epoch epoch, int layer, std::shared_ptr<runtime::CopyFence> fence);
  void OpenSession(uint64_t id, Epoch epoch, std::string target, std::vector<BlockId> source);
  void SendReadyLayers();
  void OnSendDone(uint64_t id, Epoch epoch, const Status& status);
  void OnOutputs(std::vector<engine::EngineOutput>&& outputs);
  void SendKvDone(uint64_t id, const Request& r, const Status& status);
  void Refresh(node::NodeMetrics& metrics);

  // A prompt whose final chunk is in the current step (engine thread only).
  struct Copying {
    uint64_t id = 0;
    Epoch epoch = 0;
    std::vector<BlockId> device_blocks;  // decode's blocks of the prompt, this node's ids
    std::vector<BlockId> staging;        // staged source only
  };
  // Layers of one session waiting for their fence (poll thread only).
  struct Outgoing {
    Epoch epoch = 0;
    bool open = false;  // KvSender session opened
    std::deque<std::pair<int, std::shared_ptr<runtime::CopyFence>>> layers;
    Nanos first_sent_at = 0;
  };
  // Poll thread: the layer queue of (id, epoch), reset if it belonged to another epoch.
  Outgoing& OutgoingFor(uint64_t id, Epoch epoch);

  node::NodeConfig config_;
  std::unique_ptr<engine::Engine> engine_;
  bool direct_ = false;                                 // set by Init
  kv_cache::KvLayout source_layout_;                    // the pool's or the staging arena's
  std::unique_ptr<runtime::HostCopyQueue> copy_queue_;  // staged: engine thread after Init
  std::unique_ptr<node::HostBlockArena> staging_;       // staged only
  bool staging_pinned_ = false;
  std::vector<Copying> copying_;  // engine thread
  node::PollThread poll_;
  // Owned by the poll thread after Init.
  std::unique_ptr<kv_transfer::Transport> transport_;
  std::unique_ptr<kv_transfer::KvSender> sender_;
  std::map<uint64_t, Outgoing> outgoing_;
  kv_transfer::RegionId source_region_ = kv_transfer::kInvalidHandle;
  std::atomic<int64_t> sessions_{0};
  node::NodeHost host_;
  std::unique_ptr<net::RpcClient> peers_;  // connections to decode nodes
  bool stopped_ = false;

  std::mutex mu_;  // guards requests_, bytes_sent_
  node::RequestTable<Request> requests_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace tandem::prefill_node
