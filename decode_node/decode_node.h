// DecodeNode: the decode role. Reserves device blocks for prompts another
// node prefills (reusing its own prefix cache, so only the missing suffix is
// sent), lands their KV in a registered host arena through KvReceiver, uploads
// it into the reserved blocks and lets the engine continue generation; or
// prefills locally (PrefillRequest with an empty reservation). Streams one
// Tokens message per engine step to the router. See docs in protocol.md.
//
// Threads: the engine thread (outputs, uploads), a PollThread owning the
// transport and KvReceiver, the NodeHost's I/O threads (RPC handlers), the
// router link thread. Request state lives in one map under mu_.
//
// Thread rule: Create/Stop from the owning thread; accessors thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/node/cancel_tombstones.h"
#include "common/node/host_block_arena.h"
#include "common/node/node_config.h"
#include "common/node/node_host.h"
#include "common/node/poll_thread.h"
#include "kv_transfer/kv_receiver.h"
#include "kv_transfer/transport.h"

namespace tandem::decode_node {

using TransportFactory = std::function<StatusOr<std::unique_ptr<kv_transfer::Transport>>()>;

struct DecodeNodeOptions {
  node::NodeConfig config;
  // Builds the KV transport; unset: from config.transport ("ucx" or error for "local").
  TransportFactory make_transport;
  // Model backend; unset: MakeBackend(config.engine.backend, config.engine.device).
  std::unique_ptr<runtime::Backend> backend;
};

struct DecodeNodeStats {
  int64_t requests = 0;          // known requests (reserved, receiving, running)
  int64_t landing_in_use = 0;    // landing blocks held (incl. quarantined)
  int64_t sessions = 0;          // open receiver sessions
  uint64_t bytes_landed = 0;     // KvDone.bytes_sent of landed transfers
};

class DecodeNode {
 public:
  static StatusOr<std::unique_ptr<DecodeNode>> Create(DecodeNodeOptions options);
  ~DecodeNode();  // Stop()
  // Stops serving: host, engine, transfer thread. Idempotent.
  void Stop();

  node::NodeHost& host() { return host_; }
  engine::Engine& engine() { return *engine_; }
  std::string address() const { return host_.address(); }
  // A snapshot (RunSync on the transfer thread for the session count).
  DecodeNodeStats Stats();
  // True when no request is known (used by the drain loop).
  bool Idle();

 private:
  struct Request {
    Epoch epoch = 0;
    bool remote = false;                 // reservation (true) or local prefill
    bool cancelled = false;              // router cancelled/released it, or the router is gone
    bool ended = false;                  // terminal entry already sent (or not owed)
    bool landed = false;                 // receiver session ended OK
    bool have_first = false;             // KvDone OK arrived
    bool completing = false;             // upload posted to the engine
    TokenId first_token = 0;
    int64_t bytes = 0;
    std::vector<BlockId> device_blocks;  // reserved blocks that need data, prompt order
    std::vector<BlockId> landing;        // landing blocks, same order
    std::weak_ptr<net::RpcConnection> peer;  // prefill connection (KvControl out)
    Nanos reserved_at = 0;
    Nanos decode_started_at = 0;         // joined the running batch (remote) or admitted (local)
    // Requests for the same id with a newer epoch (the router's Release + local
    // prefill, re-dispatch) wait until the engine has ended this one: run after erase.
    std::vector<std::function<void()>> then;
  };

  DecodeNode() = default;
  Status Init(DecodeNodeOptions options);

  void OnRequest(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message, net::Responder responder);
  void OnMessage(const std::shared_ptr<net::RpcConnection>& conn, net::MessagePtr message);
  void HandleReserve(const proto::ReserveRequest& reserve, net::Responder responder);
  void OnReserved(uint64_t id, Epoch epoch, uint32_t lease_ms, StatusOr<scheduler::Reservation> reservation,
                  net::Responder responder);
  void HandleLocalPrefill(const proto::PrefillRequest& prefill, net::Responder responder);
  void HandleCancel(uint64_t id, Epoch epoch);
  void HandleKvDone(const proto::KvDone& done);
  void HandleKvControl(const std::shared_ptr<net::RpcConnection>& conn, const proto::KvControl& control);
  void OnSessionDone(uint64_t id, Epoch epoch, const Status& status);
  // REQUIRES: mu_ held. Posts the upload + CompleteReservation when both halves are in.
  void MaybeCompleteLocked(uint64_t id, Request& r);
  void Upload(uint64_t id);
  // Ends a request with an error entry: engine Cancel, receiver Cancel, landing quarantined.
  void Fail(uint64_t id, Epoch epoch, const Status& status);
  // REQUIRES: mu_ held. Cancels the engine side and releases the transfer side.
  void AbandonLocked(uint64_t id, Request& r, const Status& reason);
  void OnRouterLost();
  // REQUIRES: mu_ held. When `id` is known: supersedes it if `epoch` is newer (queues
  // `retry` until the engine ended it) and returns true; or fails `responder`
  // (AlreadyExists) and returns true. False when the id is free.
  bool SupersedeLocked(uint64_t id, Epoch epoch, std::function<void()> retry, const net::Responder& responder);
  // REQUIRES: mu_ held. Fails `responder` (Cancelled) and returns true when a cancel of
  // `id` at `epoch` came before the request did.
  bool RefuseBuriedLocked(uint64_t id, Epoch epoch, const net::Responder& responder);
  void OnOutputs(std::vector<engine::EngineOutput>&& outputs);
  void SendEntry(const proto::TokenEntry& entry);
  void Refresh(node::NodeMetrics& metrics);

  node::NodeConfig config_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<node::HostBlockArena> landing_;
  node::PollThread poll_;
  // Owned by the poll thread after Init.
  std::unique_ptr<kv_transfer::Transport> transport_;
  std::unique_ptr<kv_transfer::KvReceiver> receiver_;
  std::atomic<int64_t> sessions_{0};
  node::NodeHost host_;
  bool stopped_ = false;

  std::mutex mu_;  // guards requests_, tombstones_, step_, bytes_landed_
  std::map<uint64_t, Request> requests_;
  node::CancelTombstones tombstones_;  // cancels that found no record of their epoch
  uint64_t step_ = 0;
  uint64_t bytes_landed_ = 0;
};

}  // namespace tandem::decode_node
