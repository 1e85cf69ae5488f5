// DecodeNode: the decode role. Reserves device blocks for prompts another node
// prefills (reusing its own prefix cache, so only the missing suffix is sent),
// receives their KV through KvReceiver, and lets the engine continue
// generation; or prefills locally (a PrefillRequest with an empty reservation).
// Streams one Tokens message per engine step to the router. Each request's
// progress is a DecodeHandoff (decode_handoff.h); this class is the adapter
// that feeds it events and runs its actions. See docs/protocol.md.
//
// Where KV lands:
//   direct — the transport reaches the engine's KV pool (device memory with
//     cuda_ipc/nccl, host memory on the CPU backend): the receiver's target is
//     the reserved blocks themselves; nothing is copied after the last layer.
//   staged — a host-only transport (UCX) with device KV: layers land in a
//     pinned, registered host arena, and each landed layer is uploaded into the
//     reserved blocks at once (one copy per run, on a copy stream the poll
//     thread owns), so the put and the upload overlap across layers.
//     NodeConfig::kv_staging forces this.
//
// Threads: the engine thread (outputs, reservations), a PollThread owning the
// transport, KvReceiver and the staged uploads, the NodeHost's I/O threads (RPC
// handlers), the router link thread. Requests live in a RequestTable under mu_.
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
#include "common/node/host_block_arena.h"
#include "common/node/node_config.h"
#include "common/node/node_host.h"
#include "common/node/poll_thread.h"
#include "common/node/request_table.h"
#include "decode_node/decode_handoff.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/transport.h"

namespace tandem::decode_node {

using TransportFactory = std::function<StatusOr<std::unique_ptr<kv_transfer::Transport>>()>;

struct DecodeNodeOptions {
  node::NodeConfig config;
  // Builds the KV transport; unset: from config.transport.
  TransportFactory make_transport;
  // Model backend; unset: MakeBackend(config.engine.backend, config.engine.device).
  std::unique_ptr<runtime::Backend> backend;
};

struct DecodeNodeStats {
  int64_t requests = 0;        // known requests (reserved, receiving, running)
  int64_t landing_in_use = 0;  // host landing blocks held, incl. quarantined (staged only)
  int64_t sessions = 0;        // open receiver sessions
  uint64_t bytes_landed = 0;   // KvDone.bytes_sent of landed transfers
};

class DecodeNode {
 public:
  static StatusOr<std::unique_ptr<DecodeNode>> Create(DecodeNodeOptions options);
  ~DecodeNode();  // Stop()
  // Stops serving: host, engine, poll thread. Idempotent.
  void Stop();

  node::NodeHost& host() { return host_; }
  engine::Engine& engine() { return *engine_; }
  std::string address() const { return host_.address(); }
  // True when KV lands straight in the engine's pool (no host landing arena).
  bool direct_landing() const { return direct_; }
  // A snapshot (RunSync on the poll thread for the session count).
  DecodeNodeStats Stats();
  // True when no request is known (used by the drain loop).
  bool Idle();

 private:
  struct Request {
    Epoch epoch = 0;
    DecodeHandoff machine = DecodeHandoff::Local();
    std::optional<net::Responder> responder;  // the router's Reserve, until answered
    proto::ReserveReply reply;                // what that answer will say
    uint32_t lease_ms = 0;
    std::vector<BlockId> device_blocks;  // reserved blocks that need data, prompt order
    std::vector<BlockId> landing;        // staged: landing blocks, same order
    TokenId first_token = 0;
    runtime::SampledLogprobs first_token_logprobs;  // KvDone's, when the request asked for logprobs
    std::vector<runtime::SampledLogprobs> prompt_logprobs;  // KvDone's, when it asked for prompt logprobs
    proto::StageTimes prefill_times;                // KvDone's: the prefill node's stages
    bool trace_timing = false;                      // the request's trace_timing: log the stages at info
    int64_t bytes = 0;                       // KvDone.bytes_sent
    std::weak_ptr<net::RpcConnection> peer;  // prefill connection (KvControl out)
    Nanos reserved_at = 0;                   // the reservation was granted (metrics)
    Nanos first_layer_at = 0;                // the first layer landed (metrics)
  };
  using Retries = std::vector<std::function<void()>>;
  // What a kForwardOutput action forwards.
  struct OutputSink {
    const engine::EngineOutput* output;  // null: nothing to forward
    proto::Tokens* tokens;
  };
  // A staged transfer's uploads (poll thread only).
  struct Upload {
    Epoch epoch = 0;
    std::vector<BlockId> device, landing;
    std::deque<std::shared_ptr<runtime::CopyFence>> fences;
    bool session_done = false;  // every layer landed in host memory
  };

  DecodeNode() = default;
  Status Init(DecodeNodeOptions options);
  Status InitTransfer(DecodeNodeOptions& options);

  void OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message, net::Responder responder);
  void OnMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message);
  void HandleReserve(const proto::ReserveRequest& reserve, net::Responder responder);
  void OnReserved(uint64_t id, Epoch epoch, StatusOr<scheduler::Reservation> reservation);
  void HandleLocalPrefill(const proto::PrefillRequest& prefill, net::Responder responder);
  void HandleKvDone(const proto::KvDone& done);
  void HandleKvControl(const std::shared_ptr<net::RpcConnection>& conn, const proto::KvControl& control);
  void OnPeerClosed(const std::shared_ptr<net::RpcConnection>& conn);
  void OnRouterLost();
  void OnOutputs(std::vector<engine::EngineOutput>&& outputs);

  // Feeds `event` to the request and runs its actions. REQUIRES: mu_ held.
  void HandleLocked(uint64_t id, Request& r, const DecodeEvent& event, Retries* retries,
                    OutputSink sink = OutputSink{nullptr, nullptr});
  void RunLocked(uint64_t id, Request& r, const DecodeActions& actions, Retries* retries, OutputSink sink);
  // Feeds `event` to (id, epoch) if it is still there, then runs waiting retries.
  void Handle(uint64_t id, Epoch epoch, const DecodeEvent& event);
  // kOpenSession: landing blocks (staged) and the receiver session on the poll thread.
  void OpenSessionLocked(uint64_t id, Request& r, Retries* retries);
  void CompleteReservationLocked(uint64_t id, Request& r);
  void ForwardLocked(const Request& r, const engine::EngineOutput& out, proto::Tokens* tokens);
  void SendError(uint64_t id, Epoch epoch, const Status& status);

  // Poll thread.
  void OpenReceiver(uint64_t id, Epoch epoch, std::vector<BlockId> target, std::vector<BlockId> device,
                    uint32_t lease_ms);
  void OnLayerLanded(uint64_t id, Epoch epoch, int layer);
  // Every layer is in the reserved blocks: observes the transfer time, feeds kKvLanded.
  void OnKvLanded(uint64_t id, Epoch epoch);
  void OnSessionDone(uint64_t id, Epoch epoch, const Status& status);
  void PollUploads();
  void Refresh(node::NodeMetrics& metrics);

  node::NodeConfig config_;
  std::unique_ptr<engine::Engine> engine_;
  bool direct_ = false;                            // set by Init
  std::unique_ptr<node::HostBlockArena> landing_;  // staged only
  bool landing_pinned_ = false;
  node::PollThread poll_;
  // Owned by the poll thread after Init.
  std::unique_ptr<kv_transfer::Transport> transport_;
  std::unique_ptr<kv_transfer::KvReceiver> receiver_;
  std::unique_ptr<runtime::HostCopyQueue> upload_queue_;  // staged only
  std::map<uint64_t, Upload> uploads_;
  std::atomic<int64_t> sessions_{0};
  node::NodeHost host_;
  bool stopped_ = false;

  std::mutex mu_;  // guards requests_, step_, bytes_landed_
  node::RequestTable<Request> requests_;
  uint64_t step_ = 0;
  uint64_t bytes_landed_ = 0;
};

}  // namespace tandem::decode_node
