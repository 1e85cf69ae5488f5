// KvSender: the prefill side of the KV handoff. One session per request: Open
// with decode's KvTarget (handshake check), then SendLayer once per layer as
// the model finishes it; each layer's blocks go out as one batch of writes with
// contiguous block runs coalesced (kv_cache::PairedBlockRuns). When a layer's batch completes
// the receiver gets LayerDone; after the last one, KvDone. On a two-sided
// transport each posted batch is also announced right away (LayerPosted: its
// sequence number on the connection and the connection's token) so that the
// receiver posts the matching receive. Every session ends exactly once
// with a Status (on_done), after which the sender no longer reads its source
// memory: success, transfer error, Abort from the receiver, Cancel, lease expiry.
//
// Control messages leave through `ControlSink` (the node wires it to the RPC
// stream towards the request's decode node; in-order delivery per request).
// Thread rule: not thread-safe; the owner thread of the Transport calls every
// method, including OnControlMessage (the RPC layer posts to it). on_done is
// invoked from these calls and may call back into the sender.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "kv_transfer/messages.h"
#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct KvSenderConfig {
  std::string model_id;       // must equal the receiver's (handshake)
  kv_cache::KvLayout layout;  // this node's pool layout; blocks are BytesPerBlockLayer apart
  int max_sessions = 4096;    // concurrent sessions; Open fails with ResourceExhausted beyond
  int max_idle_peers = 64;    // cached connections without sessions kept for reuse
  // A failed session waits this long for its in-flight batches to let go of the
  // source memory after Cancel; then the peer is disconnected (which ends every
  // batch to it, failing its other sessions too). Covers a hung peer whose
  // transport cannot cancel a posted put. Longer than a healthy layer transfer.
  int64_t drain_timeout_ms = 2000;
  Status Validate() const;
};

struct SendParams {
  std::string target;                  // encoded KvTarget from the decode node
  std::vector<BlockId> source_blocks;  // this node's block ids, one per target block, same order
  std::function<void(const Status&)> on_done;
};

// Where one layer of a session's source blocks lives: block b of this layer is at
// `offset + b * layout.BytesPerBlockLayer()` inside registered region `region`.
// Full pool: offset = layout.BlockOffset(layer, 0). A staging buffer holding just
// this layer's blocks back to back: source_blocks 0..n-1 and offset = its start.
struct LayerSource {
  RegionId region = kInvalidHandle;
  uint64_t offset = 0;
};

struct KvSenderStats {
  uint64_t sessions_opened = 0, sessions_ok = 0, sessions_failed = 0;
  uint64_t writes_posted = 0, bytes_sent = 0, stale_messages = 0, bad_messages = 0;
  uint64_t forced_disconnects = 0;  // peers dropped because a drain timed out
};

class KvSender {
 public:
  // REQUIRES: config.Validate() OK; transport, clock outlive this.
  KvSender(const KvSenderConfig& config, Transport& transport, Clock& clock, ControlSink sink);
  ~KvSender();  // REQUIRES: num_sessions() == 0 (sessions end through Cancel + Poll)

  // Starts a session. Refuses (and tells decode through Abort when the target
  // parsed) on bad targets, incompatible layout/model, or unreachable peers.
  Status Open(SendParams params);
  // Posts one layer. REQUIRES: the source holds the layer's data now; it is read
  // until the session's on_done. Errors for unknown sessions or repeated layers.
  // Two-sided: REQUIRES this sender is the only one posting on its transport's
  // connections (the LayerPosted sequence numbers count its posts).
  Status SendLayer(RequestId request_id, int layer, const LayerSource& source);
  // Ends a session with `reason` (also sent to the receiver). Unknown ids ignored.
  // on_done follows once no batch of the session is in flight (maybe in a later Poll).
  void Cancel(RequestId request_id, const Status& reason);
  // Cancel for every session (shutdown); Poll until num_sessions() is 0 before
  // destroying the sender (at most drain_timeout_ms with a hung peer).
  void CancelAll(const Status& reason);
  // Handles a receiver's control message (Abort). Malformed or stale ones are dropped.
  void OnControlMessage(std::string_view bytes);
  // Progresses the transport, completes layers, expires leases.
  void Poll();

  size_t num_sessions() const { return sessions_.size(); }
  const KvSenderStats& stats() const { return stats_; }
  // Connections held: in use by sessions or cached for reuse.
  size_t num_peers() const { return peers_.size(); }
  // Write batches posted and not yet completed.
  size_t num_in_flight() const { return transfers_.size(); }

 private:
  struct Peer;
  struct Session;
  using DoneList = std::vector<std::pair<std::function<void(const Status&)>, Status>>;

  StatusOr<PeerId> AcquirePeer(const std::string& address, const std::string& descriptor, RemoteRegionId* remote);
  void ReleasePeer(PeerId peer, bool broken);
  void Fail(Session& s, const Status& status, bool tell_receiver);
  // Disconnects a peer whose batches do not let go (drain timeout).
  void ForceDisconnect(PeerId peer);
  // Disconnects idle peers the transport reports gone; marks busy ones broken.
  void DropGonePeers();
  void MaybeFinish(RequestId request_id, DoneList* done);
  void Send(const Session& s, const ControlMessage& m);
  static void RunDone(DoneList& done);

  KvSenderConfig config_;
  Transport& transport_;
  Clock& clock_;
  ControlSink sink_;
  std::map<std::string, Peer> peers_;  // by worker address
  std::map<RequestId, Session> sessions_;
  std::map<TransferId, std::pair<RequestId, int>> transfers_;  // -> (request, layer)
  KvSenderStats stats_;
  bool two_sided_;          // the transport needs the receiver to post receives (LayerPosted)
  LogLimiter refusal_log_;  // handshake refusals, either way
};

}  // namespace tandem::kv_transfer
