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
// Caveat: with one-sided writes the receiver cannot stop a remote writer. After
// a failed session the sender is told (Abort), but the node should keep the
// blocks out of reuse for a grace period (README.md, "Late writes").
// Thread rule: not thread-safe; the owner thread of the Transport calls every
// method. Callbacks run inside these calls and may call back into the receiver.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "kv_transfer/messages.h"
#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct KvReceiverConfig {
  std::string model_id;       // must equal the sender's (handshake)
  kv_cache::KvLayout layout;  // the landing pool; num_blocks = its size
  int max_sessions = 4096;    // concurrent sessions; Open fails with ResourceExhausted beyond
  uint32_t default_lease_ms = 10'000;  // lease when ReceiveParams::lease_ms is 0; cover a
                                       // whole prefill of the longest prompt plus transfer
  Status Validate() const;
};

struct ReceiveParams {
  RequestId request_id = 0;
  Epoch epoch = 0;
  std::vector<BlockId> blocks;  // landing block ids to fill, in token order (non-empty)
  uint32_t lease_ms = 0;        // 0: config default
  std::function<void(int layer)> on_layer;      // optional
  std::function<void(const Status&)> on_done;   // once
};

struct KvReceiverStats {
  uint64_t sessions_opened = 0, sessions_ok = 0, sessions_failed = 0;
  uint64_t layers_landed = 0, stale_messages = 0, bad_messages = 0;
};

class KvReceiver {
 public:
  // REQUIRES: config.Validate() OK; transport, clock outlive this.
  KvReceiver(const KvReceiverConfig& config, Transport& transport, Clock& clock, ControlSink sink);
  // Ends every open session with Cancelled, then unregisters the landing memory.
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
    std::vector<bool> landed;
    int layers_landed = 0;
    std::function<void(int)> on_layer;
    std::function<void(const Status&)> on_done;
  };
  // Removes the session and runs on_done (tells the sender first when asked).
  void End(RequestId request_id, const Status& status, bool tell_sender);
  // What a message does to a session: OK to continue, an error to end it.
  // Sets *finished when the session landed completely.
  Status Apply(Session& s, const ControlMessage& m, bool* finished);

  KvReceiverConfig config_;
  Transport& transport_;
  Clock& clock_;
  ControlSink sink_;
  RegisteredRegion landing_;
  std::map<RequestId, Session> sessions_;
  KvReceiverStats stats_;
};

}  // namespace tandem::kv_transfer
