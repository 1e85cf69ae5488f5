// PrefillNode: the prefill role. Takes PrefillRequests from the router, runs
// each prompt through its engine as a one-token request (the request's
// sampling, max_tokens = 1), and streams the KV decode still needs layer by
// layer while the model computes: when a step holds a prompt's final chunk,
// the engine's ForwardObserver lets the node queue, after each layer, async
// copies of that layer's blocks into a pinned, transport-registered staging
// arena (Backend HostCopyQueue); the poll thread sends a layer with KvSender
// into decode's landing memory as soon as its copy fence is ready. When every
// layer is sent and the first token is sampled it sends KvDone(first token)
// to decode. Failures and cancels send KvDone with the error. KvControl bytes
// travel on the prefill->decode RPC connection (both directions).
//
// Threads: engine thread (observer: staging allocation, layer copies;
// outputs), a PollThread owning the transport, KvSender and the per-request
// layer queues, the NodeHost's I/O threads, the router link thread. Job state
// lives in one map under mu_.
//
// Thread rule: Create/Stop from the owning thread; accessors thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/net/rpc_client.h"
#include "common/node/cancel_tombstones.h"
#include "common/node/host_block_arena.h"
#include "common/node/node_config.h"
#include "common/node/node_host.h"
#include "common/node/poll_thread.h"
#include "kv_transfer/kv_sender.h"
#include "kv_transfer/transport.h"

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
  int64_t jobs = 0;            // jobs not yet finished
  int64_t staging_in_use = 0;  // staging blocks held
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
  PrefillNodeStats Stats();
  bool Idle();

 private:
  struct Job {
    Epoch epoch = 0;
    std::string decode_address;
    std::string target;        // decode's KvTarget
    int first_block = 0;       // first prompt block decode needs
    int num_blocks = 0;        // blocks decode needs
    int prompt_len = 0;
    bool ended = false;        // KvDone sent (or abandoned)
    bool engine_done = false;  // the engine's finish record arrived
    bool staged = false;       // staging allocated; its layer copies are queued
    bool session_open = false; // KvSender session started and not yet done
    bool transfer_done = false;
    Status transfer_status;
    bool have_token = false;
    TokenId first_token = 0;
    std::vector<BlockId> staging;
    std::shared_ptr<net::RpcConnection> decode_conn;
    Nanos submitted_at = 0, computed_at = 0;
  };

  PrefillNode() = default;
  Status Init(PrefillNodeOptions options);

  void OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message, net::Responder responder);
  void OnPeerMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message);
  void HandlePrefill(const proto::PrefillRequest& prefill, net::Responder responder);
  // ForwardObserver hooks (engine thread).
  bool OnStepBegin(const scheduler::SchedulerOutput& step);
  void OnLayer(int layer);
  void OnStepEnd(const Status& status);
  // Poll thread: queues a layer whose copy ends at `fence`; sends what is ready.
  void OnLayerQueued(uint64_t id, Epoch epoch, int layer, std::shared_ptr<runtime::CopyFence> fence);
  void SendReadyLayers();
  void OnOutputs(std::vector<engine::EngineOutput>&& outputs);
  void OnSendDone(uint64_t id, Epoch epoch, const Status& status);
  // REQUIRES: mu_ held.
  void MaybeOpenLocked(uint64_t id, Job& job);
  void MaybeFinishLocked(uint64_t id, Job& job);
  void MaybeEraseLocked(std::map<uint64_t, Job>::iterator it);
  void FailLocked(uint64_t id, Job& job, const Status& status);
  void SendKvDoneLocked(uint64_t id, const Job& job, const Status& status);
  void Refresh(node::NodeMetrics& metrics);

  // A prompt whose final chunk is in the current step (engine thread only).
  struct Copying {
    uint64_t id = 0;
    Epoch epoch = 0;
    std::vector<BlockId> device_blocks;  // decode's blocks of the prompt, device ids
    std::vector<BlockId> staging;
    Status status;
  };
  // Layers of one session waiting for their copy fence (poll thread only).
  struct Outgoing {
    Epoch epoch = 0;
    bool open = false;  // KvSender session opened
    std::deque<std::pair<int, std::shared_ptr<runtime::CopyFence>>> layers;
  };
  // Poll thread: the layer queue of (id, epoch), reset if it belonged to another epoch.
  Outgoing& OutgoingFor(uint64_t id, Epoch epoch);

  node::NodeConfig config_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<runtime::HostCopyQueue> copy_queue_;  // engine thread after Init
  std::vector<Copying> copying_;                         // engine thread
  std::unique_ptr<node::HostBlockArena> staging_;
  bool staging_pinned_ = false;
  node::PollThread poll_;
  // Owned by the poll thread after Init.
  std::unique_ptr<kv_transfer::Transport> transport_;
  std::unique_ptr<kv_transfer::KvSender> sender_;
  std::map<uint64_t, Outgoing> outgoing_;
  kv_transfer::RegionId staging_region_ = kv_transfer::kInvalidHandle;
  std::atomic<int64_t> sessions_{0};
  node::NodeHost host_;
  std::unique_ptr<net::RpcClient> peers_;  // connections to decode nodes
  bool stopped_ = false;

  std::mutex mu_;  // guards jobs_, tombstones_, bytes_sent_
  std::map<uint64_t, Job> jobs_;
  node::CancelTombstones tombstones_;  // cancels that found no job of their epoch
  uint64_t bytes_sent_ = 0;
};

}  // namespace tandem::prefill_node
