// KvReceiver: the decode side of the KV handoff. It registers decode's landing
// memory (for the UCX path: the pinned host landing buffer, laid out per
// KvLayout) and opens one session per request: the blocks to fill, an epoch,
// a lease. Open returns the encoded KvTarget that travels to the prefill node.
// The sender's control messages drive the session:
//
//   AwaitingHello --Hello(compatible)--> Receiving --LayerDone x num_layers,
//   KvDone--> Landed (on_done OK)
//
// and every other path (Abort from the sender, incompatible Hello, protocol
// violation, lease expiry, Cancel, a newer epoch, destruction) ends it with an
// error Status. Messages of another epoch are ignored (fencing). A session ends
// exactly once; on_layer(layer) reports each landed layer (for layer-wise H2D).
//
// Two-sided transports (nccl): the receiver also posts the receives. The sender
// announces each posted layer batch (LayerPosted: the connection's token and the
// batch's sequence number on it); the receiver Accepts each connection once and
// posts the matching receive batches strictly in sequence order, into the
// session's blocks (its own block runs) or, for a batch nobody wants any more
// (failed or unknown session), into nowhere, so the connection stays in step.
// A layer counts as landed when its receive batch completes (LayerDone is then
// only checked); the session ends OK on KvDone once every layer landed. A
// receive not done within receive_timeout_ms, or an announcement the connection
// cannot honour, resets the connection (Disconnect: its batches end Unavailable,
// the sender reconnects for later sessions).
//
// Caveat: the receiver cannot stop a writer: one-sided writes, and two-sided
// receives already posted, may land after a session failed. After a failed
// session the sender is told (Abort), but the node should keep the blocks out
// of reuse for a grace period (README.md, "Late writes").
// Thread rule: not thread-safe; the owner thread of the Transport calls every
// method. Callbacks run inside these calls and may call back into the receiver.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "kv_transfer/messages.h"
#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct KvReceiverConfig {
  std::string model_id;                // must equal the sender's (handshake)
  kv_cache::KvLayout layout;           // the landing pool; num_blocks = its size
  int max_sessions = 4096;             // concurrent sessions; Open fails with ResourceExhausted beyond
  uint32_t default_lease_ms = 10'000;  // lease when ReceiveParams::lease_ms is 0; cover a
                                       // whole prefill of the longest prompt plus transfer
  // Two-sided: a receive batch posted this long ago and not done means its
  // connection is stuck (the writer died or hung): the connection is reset.
  // Longer than a healthy layer transfer plus the backlog ahead of it.
  int64_t receive_timeout_ms = 5000;
  Status Validate() const;
};

struct ReceiveParams {
  RequestId request_id = 0;
  Epoch epoch = 0;
  std::vector<BlockId> blocks;                 // landing block ids to fill, in token order (non-empty)
  uint32_t lease_ms = 0;                       // 0: config default
  std::function<void(int layer)> on_layer;     // optional
  std::function<void(const Status&)> on_done;  // once
};

struct KvReceiverStats {
  uint64_t sessions_opened = 0, sessions_ok = 0, sessions_failed = 0;
  uint64_t layers_landed = 0, stale_messages = 0, bad_messages = 0;
  // Two-sided transports only.
  uint64_t receives_posted = 0, receives_discarded = 0, connections_reset = 0;
};

class KvReceiver {
 public:
  // REQUIRES: config.Validate() OK; transport, clock outlive this.
  KvReceiver(const KvReceiverConfig& config, Transport& transport, Clock& clock, ControlSink sink);
  // Ends every open session with Cancelled, disconnects accepted connections
  // (waiting up to receive_timeout_ms for their receives to end), then
  // unregisters the landing memory.
  ~KvReceiver();

  // Registers layout.TotalBytes() at `base` as the landing memory. Once.
  Status RegisterLanding(void* base, MemoryKind kind);
  // Opens a session and returns the encoded KvTarget for the sender. A newer epoch
  // replaces (cancels) an open session of the same request; an older or equal one
  // is refused with AlreadyExists.
  StatusOr<std::string> Open(ReceiveParams params);
  // Ends a session with `reason` and tells the sender. Unknown ids ignored.
  void Cancel(RequestId request_id, const Status& reason);
  // Handles a sender's control message; malformed or stale ones are dropped.
  void OnControlMessage(std::string_view bytes);
  // Progresses the transport (RMA over tcp needs the target to progress) and
  // expires leases.
  void Poll();

  size_t num_sessions() const { return sessions_.size(); }
  const KvReceiverStats& stats() const { return stats_; }

 private:
  enum class State { kAwaitingHello, kReceiving };
  struct Session {
    Epoch epoch = 0;
    State state = State::kAwaitingHello;
    Nanos opened_at = 0, deadline = 0;
    std::vector<BlockId> blocks;
    std::vector<uint8_t> layer_state;  // 0 waiting, 1 receive posted (two-sided), 2 landed
    int layers_landed = 0;
    bool kv_done = false;    // two-sided: KvDone came; ends OK once every layer landed
    std::string connection;  // two-sided: the token its layers arrive on
    std::function<void(int)> on_layer;
    std::function<void(const Status&)> on_done;
  };
  // An announced write batch waiting for its turn on the connection.
  struct Announced {
    RequestId request_id;
    Epoch epoch;
    uint32_t layer;
    uint64_t bytes;
  };
  // A connection a sender made (two-sided), keyed by its token.
  struct Connection {
    PeerId peer = kInvalidHandle;
    uint64_t next_seq = 0;                    // the next batch to post a receive for
    std::map<uint64_t, Announced> announced;  // by seq, ahead of next_seq
  };
  struct Receive {
    std::string connection;
    bool wanted = false;  // false: a discard, for no session
    RequestId request_id = 0;
    Epoch epoch = 0;
    uint32_t layer = 0;
    Nanos posted_at = 0;
  };

  // Removes the session and runs on_done (tells the sender first when asked).
  void End(RequestId request_id, const Status& status, bool tell_sender);
  // What a message does to a session: OK to continue, an error to end it.
  // Sets *finished when the session landed completely.
  Status Apply(Session& s, const ControlMessage& m, bool* finished);
  // A layer landed (LayerDone one-sided, its receive event two-sided).
  void Landed(Session& s, uint32_t layer);
  bool Complete(const Session& s) const { return s.layers_landed == config_.layout.num_layers; }

  // Two-sided (kv_receiver_two_sided.cc).
  void OnLayerPosted(const ControlMessage& m);
  // Posts receives for every announced batch whose turn has come.
  void PostAnnounced(const std::string& token);
  // The receive batch for one announcement: the session's block runs of the
  // layer, or a discard of `bytes`. Fails the session when it cannot take it.
  std::vector<WriteOp> ReceiveOps(const std::string& token, const Announced& a, bool* wanted);
  void OnReceiveEvent(const TransferEvent& e);
  // Disconnects a connection: its receives end with Unavailable, its sessions fail.
  void ResetConnection(const std::string& token, const Status& why);
  void ExpireStuckReceives(Nanos now);

  KvReceiverConfig config_;
  Transport& transport_;
  Clock& clock_;
  ControlSink sink_;
  bool two_sided_;
  RegisteredRegion landing_;
  std::map<RequestId, Session> sessions_;
  std::map<std::string, Connection> connections_;  // two-sided, by token
  std::set<std::string> reset_tokens_;             // connections never to accept again
  std::map<TransferId, Receive> receives_;         // two-sided receive batches in flight
  KvReceiverStats stats_;
  LogLimiter refusal_log_;  // handshake refusals, either way
};

}  // namespace tandem::kv_transfer
