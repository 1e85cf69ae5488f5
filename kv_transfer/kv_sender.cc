#include "kv_transfer/kv_sender.h"

#include <fmt/format.h>

#include "common/base/logging.h"
#include "common/kv_cache/block_runs.h"

#include <set>
#include <utility>

namespace tandem::kv_transfer {

struct KvSender::Peer {
  PeerId id = kInvalidHandle;
  int refs = 0;
  bool broken = false;                            // a transfer to it failed as Unavailable: reconnect next time
  std::map<std::string, RemoteRegionId> remotes;  // by descriptor bytes
  std::string token;                              // two-sided: the connection's token, sent with every LayerPosted
  uint64_t next_seq = 0;                          // two-sided: write batches posted on the connection so far
};

struct KvSender::Session {
  KvTarget target;
  std::vector<kv_cache::BlockRunPair> runs;  // source and target blocks, coalesced once for every layer
  std::function<void(const Status&)> on_done;
  std::string address;
  PeerId peer = kInvalidHandle;
  RemoteRegionId remote = kInvalidHandle;
  Nanos deadline = 0;
  Nanos drain_deadline = 0;          // set by Fail
  std::vector<uint8_t> layer_state;  // 0 not posted, 1 in flight, 2 landed
  int layers_landed = 0;
  int in_flight = 0;
  bool peer_broken = false;
  Status failure;  // non-OK: ending, waiting for in-flight batches to let go
};

Status KvSenderConfig::Validate() const {
  if (model_id.empty()) return InvalidArgumentError("kv sender: model_id is required");
  TANDEM_RETURN_IF_ERROR(layout.Validate());
  if (max_sessions <= 0 || max_idle_peers < 0 || drain_timeout_ms <= 0) {
    return InvalidArgumentError("kv sender: max_sessions, drain_timeout_ms must be > 0, max_idle_peers >= 0");
  }
  return Status::Ok();
}

KvSender::KvSender(const KvSenderConfig& config, Transport& transport, Clock& clock, ControlSink sink)
    : config_(config),
      transport_(transport),
      clock_(clock),
      sink_(std::move(sink)),
      two_sided_(!transport.Capabilities().one_sided),
      refusal_log_(clock) {
  TANDEM_CHECK_OK(config.Validate());
  TANDEM_CHECK(sink_ != nullptr);
}

KvSender::~KvSender() {
  TANDEM_CHECK(sessions_.empty()) << sessions_.size() << " KV send sessions leaked";
  for (auto& [address, peer] : peers_) transport_.Disconnect(peer.id).IgnoreError();
}

void KvSender::Send(const Session& s, const ControlMessage& m) { sink_(s.target.request_id, EncodeControlMessage(m)); }

void KvSender::RunDone(DoneList& done) {
  for (auto& [fn, status] : done) {
    if (fn) fn(status);
  }
  done.clear();
}

StatusOr<PeerId> KvSender::AcquirePeer(const std::string& address, const std::string& descriptor,
                                       RemoteRegionId* remote) {
  auto it = peers_.find(address);
  if (it != peers_.end() && it->second.broken && it->second.refs == 0) {
    transport_.Disconnect(it->second.id).IgnoreError();
    peers_.erase(it);
    it = peers_.end();
  }
  if (it == peers_.end()) {
    TANDEM_ASSIGN_OR_RETURN(PeerId id, transport_.Connect(address));
    Peer peer;
    peer.id = id;
    if (two_sided_) {
      StatusOr<std::string> token = transport_.ConnectionToken(id);
      if (!token.ok()) {
        transport_.Disconnect(id).IgnoreError();
        return token.status();
      }
      peer.token = std::move(*token);
    }
    it = peers_.emplace(address, std::move(peer)).first;
  }
  Peer& peer = it->second;
  auto r = peer.remotes.find(descriptor);
  if (r == peer.remotes.end()) {
    StatusOr<RemoteRegionId> loaded = transport_.LoadRemoteRegion(peer.id, descriptor);
    if (!loaded.ok()) {
      if (peer.refs == 0 && peer.remotes.empty()) {
        transport_.Disconnect(peer.id).IgnoreError();
        peers_.erase(it);
      }
      return loaded.status();
    }
    r = peer.remotes.emplace(descriptor, *loaded).first;
  }
  ++peer.refs;
  *remote = r->second;
  return peer.id;
}

void KvSender::ReleasePeer(PeerId id, bool broken) {
  int idle = 0;
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& p = it->second;
    if (p.id == id) {
      --p.refs;
      p.broken = p.broken || broken;
    }
    if (p.refs == 0 && (p.broken || ++idle > config_.max_idle_peers)) {
      transport_.Disconnect(p.id).IgnoreError();
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
}

Status KvSender::Open(SendParams params) {
  TANDEM_ASSIGN_OR_RETURN(KvTarget target, DecodeKvTarget(params.target));
  // From here on the receiver is told about any refusal, so it frees at once.
  auto refuse = [&](const Status& st) {
    ControlMessage abort = MakeMessage(MessageType::kAbort, target.request_id, target.epoch);
    abort.status = st;
    sink_(target.request_id, EncodeControlMessage(abort));
    return st;
  };
  auto existing = sessions_.find(target.request_id);
  if (existing != sessions_.end()) {
    if (existing->second.target.epoch >= target.epoch) {
      return AlreadyExistsError(fmt::format("request {} already has a send session at epoch {}", target.request_id,
                                            existing->second.target.epoch));
    }
    Cancel(target.request_id, CancelledError("superseded by a newer epoch"));
    if (sessions_.count(target.request_id) > 0) {
      return refuse(UnavailableError("the previous epoch's transfers are still draining; retry"));
    }
  }
  Status st = CheckCompatible(config_.model_id, config_.layout, target.model_id, target.layout);
  if (!st.ok()) {
    LogHandshakeRefusal(refusal_log_, "kv sender", target.request_id, st, /*by_peer=*/false);
    return refuse(st);
  }
  if (params.source_blocks.size() != target.blocks.size()) {
    return refuse(InvalidArgumentError(
        fmt::format("{} source blocks for {} target blocks", params.source_blocks.size(), target.blocks.size())));
  }
  for (BlockId b : params.source_blocks) {
    if (b < 0 || b >= config_.layout.num_blocks) {
      return refuse(InvalidArgumentError(fmt::format("source block {} outside the pool", b)));
    }
  }
  if (sessions_.size() >= static_cast<size_t>(config_.max_sessions)) {
    return refuse(ResourceExhaustedError("too many KV send sessions"));
  }
  Session s;
  StatusOr<PeerId> peer = AcquirePeer(target.worker_address, target.region_descriptor, &s.remote);
  if (!peer.ok()) return refuse(peer.status().WithContext("connecting to the KV receiver"));
  s.peer = *peer;
  s.address = target.worker_address;
  s.deadline = clock_.NowNanos() + MsToNanos(target.lease_ms);
  s.layer_state.assign(config_.layout.num_layers, 0);
  s.runs = kv_cache::PairedBlockRuns(params.source_blocks, target.blocks);
  s.on_done = std::move(params.on_done);
  s.target = std::move(target);
  RequestId id = s.target.request_id;
  Session& placed = sessions_.emplace(id, std::move(s)).first->second;
  ++stats_.sessions_opened;
  ControlMessage hello = MakeMessage(MessageType::kHello, id, placed.target.epoch);
  hello.model_id = config_.model_id;
  hello.layout = config_.layout;
  Send(placed, hello);
  return Status::Ok();
}

Status KvSender::SendLayer(RequestId request_id, int layer, const LayerSource& source) {
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return NotFoundError(fmt::format("no send session for request {}", request_id));
  Session& s = it->second;
  if (!s.failure.ok()) return FailedPreconditionError("session is ending: " + s.failure.ToString());
  if (layer < 0 || layer >= config_.layout.num_layers) return InvalidArgumentError("layer out of range");
  if (s.layer_state[layer] != 0) return InvalidArgumentError(fmt::format("layer {} already sent", layer));
  // One write per run where both source and target blocks are consecutive.
  const uint64_t bpb = config_.layout.BytesPerBlockLayer();
  std::vector<WriteOp> ops;
  ops.reserve(s.runs.size());
  uint64_t bytes = 0;
  for (const kv_cache::BlockRunPair& run : s.runs) {
    ops.push_back(WriteOp{.local_region = source.region,
                          .local_offset = source.offset + run.src_block * bpb,
                          .remote_region = s.remote,
                          .remote_offset = s.target.region_offset + s.target.layout.BlockOffset(layer, run.dst_block),
                          .length = run.num_blocks * bpb});
    bytes += ops.back().length;
  }
  StatusOr<TransferId> xfer = transport_.PostWrites(s.peer, ops);
  if (!xfer.ok()) {
    s.peer_broken = s.peer_broken || xfer.status().code() == StatusCode::kUnavailable;
    DoneList done;
    Fail(s, xfer.status().WithContext(fmt::format("posting layer {}", layer)), true);
    MaybeFinish(request_id, &done);
    RunDone(done);
    return xfer.status();
  }
  transfers_[*xfer] = {request_id, layer};
  if (two_sided_) {  // the receiver posts the matching receive batch in `seq` order
    auto peer = peers_.find(s.address);
    TANDEM_CHECK(peer != peers_.end() && peer->second.id == s.peer) << "session without its connection";
    ControlMessage posted = MakeMessage(MessageType::kLayerPosted, request_id, s.target.epoch);
    posted.layer = static_cast<uint32_t>(layer);
    posted.bytes = bytes;
    posted.seq = peer->second.next_seq++;
    posted.connection = peer->second.token;
    Send(s, posted);
  }
  s.layer_state[layer] = 1;
  ++s.in_flight;
  stats_.writes_posted += ops.size();
  return Status::Ok();
}

void KvSender::Fail(Session& s, const Status& status, bool tell_receiver) {
  if (!s.failure.ok()) return;
  s.failure = status;
  s.drain_deadline = clock_.NowNanos() + MsToNanos(config_.drain_timeout_ms);
  for (auto& [xfer, owner] : transfers_) {
    if (owner.first == s.target.request_id) transport_.Cancel(xfer);
  }
  if (tell_receiver) {
    ControlMessage abort = MakeMessage(MessageType::kAbort, s.target.request_id, s.target.epoch);
    abort.status = status;
    Send(s, abort);
  }
}

void KvSender::MaybeFinish(RequestId request_id, DoneList* done) {
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  bool landed = s.layers_landed == config_.layout.num_layers;
  if (s.in_flight > 0 || (s.failure.ok() && !landed)) return;
  if (s.failure.ok()) {
    ControlMessage kv_done = MakeMessage(MessageType::kKvDone, request_id, s.target.epoch);
    kv_done.num_layers = static_cast<uint32_t>(config_.layout.num_layers);
    Send(s, kv_done);
    ++stats_.sessions_ok;
  } else {
    ++stats_.sessions_failed;
  }
  done->emplace_back(std::move(s.on_done), s.failure);
  PeerId peer = s.peer;
  bool broken = s.peer_broken;
  sessions_.erase(it);
  ReleasePeer(peer, broken);
}

void KvSender::Cancel(RequestId request_id, const Status& reason) {
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return;
  DoneList done;
  Fail(it->second, reason.ok() ? CancelledError("cancelled") : reason, true);
  MaybeFinish(request_id, &done);
  RunDone(done);
}

void KvSender::CancelAll(const Status& reason) {
  std::vector<RequestId> ids;
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  for (RequestId id : ids) Cancel(id, reason);
}

void KvSender::ForceDisconnect(PeerId peer) {
  for (auto it = peers_.begin(); it != peers_.end(); ++it) {
    if (it->second.id == peer) {
      peers_.erase(it);
      break;
    }
  }
  ++stats_.forced_disconnects;
  TANDEM_LOG_WARN("kv sender: peer did not release cancelled transfers in {} ms; disconnecting",
                  config_.drain_timeout_ms);
  // Every batch to it now ends through Poll. Its other sessions cannot post any more.
  transport_.Disconnect(peer).IgnoreError();
  for (auto& [id, s] : sessions_) {
    if (s.peer == peer) Fail(s, UnavailableError("KV receiver hung: connection dropped"), true);
  }
}

void KvSender::OnControlMessage(std::string_view bytes) {
  StatusOr<ControlMessage> m = DecodeControlMessage(bytes);
  if (!m.ok()) {
    ++stats_.bad_messages;  // counted, logged at debug: a hostile peer must not flood the log
    TANDEM_LOG_DEBUG("kv sender: dropping malformed control message: {}", m.status().ToString());
    return;
  }
  auto it = sessions_.find(m->request_id);
  if (it == sessions_.end() || it->second.target.epoch != m->epoch) {
    ++stats_.stale_messages;
    return;
  }
  if (m->type != MessageType::kAbort) {
    ++stats_.stale_messages;  // receivers send only Abort
    return;
  }
  if (IsHandshakeRefusal(m->status)) {
    LogHandshakeRefusal(refusal_log_, "kv sender", m->request_id, m->status, /*by_peer=*/true);
  }
  DoneList done;
  // Unavailable from the receiver: it gave up on the connection (a two-sided
  // receiver resets stuck connections), so the next session reconnects.
  if (m->status.code() == StatusCode::kUnavailable) it->second.peer_broken = true;
  Fail(it->second, m->status.WithContext("receiver aborted"), false);
  MaybeFinish(m->request_id, &done);
  RunDone(done);
}

void KvSender::Poll() {
  std::vector<TransferEvent> events;
  transport_.Poll(&events);
  DoneList done;
  for (const TransferEvent& e : events) {
    auto t = transfers_.find(e.id);
    if (t == transfers_.end()) continue;
    auto [request_id, layer] = t->second;
    transfers_.erase(t);
    auto it = sessions_.find(request_id);
    TANDEM_CHECK(it != sessions_.end()) << "transfer outlived its session";
    Session& s = it->second;
    --s.in_flight;
    if (e.status.ok()) {
      s.layer_state[layer] = 2;
      ++s.layers_landed;
      stats_.bytes_sent += e.bytes;
      if (s.failure.ok()) {
        ControlMessage m = MakeMessage(MessageType::kLayerDone, request_id, s.target.epoch);
        m.layer = static_cast<uint32_t>(layer);
        m.bytes = e.bytes;
        Send(s, m);
      }
    } else {
      s.peer_broken = s.peer_broken || e.status.code() == StatusCode::kUnavailable;
      Fail(s, e.status.WithContext(fmt::format("KV transfer of layer {}", layer)), true);
    }
    MaybeFinish(request_id, &done);
  }
  Nanos now = clock_.NowNanos();
  std::vector<RequestId> expired;
  for (auto& [id, s] : sessions_) {
    if (s.failure.ok() && now >= s.deadline) expired.push_back(id);
  }
  for (RequestId id : expired) {
    Fail(sessions_.at(id), DeadlineExceededError("KV send lease expired"), true);
    MaybeFinish(id, &done);
  }
  std::set<PeerId> hung;
  for (auto& [id, s] : sessions_) {
    if (!s.failure.ok() && s.in_flight > 0 && now >= s.drain_deadline) {
      hung.insert(s.peer);
      s.drain_deadline = now + MsToNanos(config_.drain_timeout_ms);  // once per timeout
    }
  }
  for (PeerId peer : hung) ForceDisconnect(peer);
  if (!hung.empty()) {
    std::vector<RequestId> ids;
    for (const auto& [id, s] : sessions_) ids.push_back(id);
    for (RequestId id : ids) MaybeFinish(id, &done);
  }
  DropGonePeers();
  RunDone(done);
}

void KvSender::DropGonePeers() {
  // A cached connection to a dead process would keep what its mappings hold
  // (with cuda_ipc, the peer's whole KV pool stays allocated on the GPU).
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& p = it->second;
    if (transport_.PeerGone(p.id)) p.broken = true;  // disconnected when its last session ends
    if (p.broken && p.refs == 0) {
      transport_.Disconnect(p.id).IgnoreError();
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace tandem::kv_transfer
