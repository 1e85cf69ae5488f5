// KvReceiver on a two-sided transport: accepting the senders' connections,
// posting receive batches in each connection's sequence order, landing layers
// on their receive events, resetting stuck connections.
#include <fmt/format.h>

#include <utility>

#include "common/base/logging.h"
#include "kv_transfer/kv_receiver.h"
#include "common/kv_cache/block_runs.h"

namespace tandem::kv_transfer {
namespace {

// Announcements may run this far ahead of the next receive to post (a gap that
// never fills is a broken control channel: the connection is reset).
constexpr uint64_t kMaxAnnouncedAhead = 4096;
constexpr size_t kMaxResetTokens = 4096;

}  // namespace

void KvReceiver::OnLayerPosted(const ControlMessage& m) {
  auto session_error = [&](const Status& st) {
    auto it = sessions_.find(m.request_id);
    if (it != sessions_.end() && it->second.epoch == m.epoch) End(m.request_id, st, true);
  };
  if (!two_sided_) {
    ++stats_.bad_messages;  // a one-sided transport has nothing to receive
    return;
  }
  if (reset_tokens_.count(m.connection) > 0) {
    ++stats_.stale_messages;
    session_error(UnavailableError("KV connection was reset"));
    return;
  }
  auto c = connections_.find(m.connection);
  if (c == connections_.end()) {
    StatusOr<PeerId> peer = transport_.Accept(m.connection);
    if (!peer.ok()) {
      ++stats_.bad_messages;
      if (reset_tokens_.size() >= kMaxResetTokens) reset_tokens_.clear();
      reset_tokens_.insert(m.connection);
      session_error(peer.status().WithContext("accepting the KV sender's connection"));
      return;
    }
    Connection conn;
    conn.peer = *peer;
    c = connections_.emplace(m.connection, std::move(conn)).first;
  }
  Connection& conn = c->second;
  const uint64_t max_bytes = kMaxBlocksPerSession * config_.layout.BytesPerBlockLayer();
  if (m.seq < conn.next_seq || conn.announced.count(m.seq) > 0) {
    ++stats_.bad_messages;  // a duplicate: the batch already has its receive
    return;
  }
  if (m.seq - conn.next_seq >= kMaxAnnouncedAhead || m.bytes > max_bytes) {
    ResetConnection(m.connection,
                    FailedPreconditionError(fmt::format("announcement {} ({} bytes) cannot be matched (next {})", m.seq,
                                                        m.bytes, conn.next_seq)));
    return;
  }
  conn.announced[m.seq] = Announced{m.request_id, m.epoch, m.layer, m.bytes};
  PostAnnounced(m.connection);
}

std::vector<WriteOp> KvReceiver::ReceiveOps(const std::string& token, const Announced& a, bool* wanted) {
  *wanted = false;
  const uint64_t bpb = config_.layout.BytesPerBlockLayer();
  auto it = sessions_.find(a.request_id);
  if (it != sessions_.end() && it->second.epoch == a.epoch) {
    Session& s = it->second;
    Status problem;
    if (s.state != State::kReceiving) {
      problem = FailedPreconditionError("protocol: LayerPosted before Hello");
    } else if (a.layer >= s.layer_state.size()) {
      problem = InvalidArgumentError("protocol: LayerPosted layer out of range");
    } else if (s.layer_state[a.layer] != 0) {
      problem = FailedPreconditionError(fmt::format("protocol: layer {} posted twice", a.layer));
    } else if (a.bytes != s.blocks.size() * bpb) {
      problem = InvalidArgumentError(
          fmt::format("protocol: layer of {} bytes for {} blocks of {} bytes", a.bytes, s.blocks.size(), bpb));
    } else if (!s.connection.empty() && s.connection != token) {
      problem = FailedPreconditionError("protocol: one session's layers on two connections");
    }
    if (problem.ok()) {
      *wanted = true;
      s.connection = token;
      s.layer_state[a.layer] = 1;
      std::vector<WriteOp> ops;
      for (const kv_cache::BlockRunPair& run : kv_cache::PairedBlockRuns(s.blocks, s.blocks)) {
        ops.push_back(WriteOp{.local_region = landing_.id,
                              .local_offset = config_.layout.BlockOffset(static_cast<int>(a.layer), run.dst_block),
                              .length = run.num_blocks * bpb});
      }
      return ops;
    }
    End(a.request_id, problem, true);
  }
  if (a.bytes == 0) return {};
  return {WriteOp{.local_region = kInvalidHandle, .length = a.bytes}};  // nobody wants it: discard
}

void KvReceiver::PostAnnounced(const std::string& token) {
  for (;;) {
    auto c = connections_.find(token);  // a failing session's callbacks may reset it
    if (c == connections_.end()) return;
    auto next = c->second.announced.find(c->second.next_seq);
    if (next == c->second.announced.end()) return;
    Announced a = next->second;
    c->second.announced.erase(next);
    ++c->second.next_seq;
    PeerId peer = c->second.peer;
    bool wanted = false;
    std::vector<WriteOp> ops = ReceiveOps(token, a, &wanted);
    StatusOr<TransferId> id = transport_.PostReceives(peer, ops);
    if (!id.ok()) {
      ResetConnection(token, id.status().WithContext("posting a KV receive"));
      return;
    }
    receives_[*id] = Receive{token, wanted, a.request_id, a.epoch, a.layer, clock_.NowNanos()};
    ++(wanted ? stats_.receives_posted : stats_.receives_discarded);
  }
}

void KvReceiver::OnReceiveEvent(const TransferEvent& e) {
  auto r = receives_.find(e.id);
  if (r == receives_.end()) return;
  Receive receive = std::move(r->second);
  receives_.erase(r);
  if (e.status.code() == StatusCode::kUnavailable) ResetConnection(receive.connection, e.status);
  if (!receive.wanted) return;
  auto it = sessions_.find(receive.request_id);
  if (it == sessions_.end() || it->second.epoch != receive.epoch) return;  // ended meanwhile
  Session& s = it->second;
  if (!e.status.ok()) {
    End(receive.request_id, e.status.WithContext(fmt::format("receiving KV layer {}", receive.layer)), true);
    return;
  }
  if (s.layer_state[receive.layer] != 1) return;
  Landed(s, receive.layer);
  it = sessions_.find(receive.request_id);  // on_layer may have ended it
  if (it != sessions_.end() && it->second.epoch == receive.epoch && it->second.kv_done && Complete(it->second)) {
    End(receive.request_id, Status::Ok(), false);
  }
}

void KvReceiver::ResetConnection(const std::string& token, const Status& why) {
  auto c = connections_.find(token);
  if (c == connections_.end()) return;
  PeerId peer = c->second.peer;
  connections_.erase(c);
  if (reset_tokens_.size() >= kMaxResetTokens) reset_tokens_.clear();
  reset_tokens_.insert(token);
  ++stats_.connections_reset;
  TANDEM_LOG_WARN("kv receiver: resetting a KV connection: {}", why.ToString());
  transport_.Disconnect(peer).IgnoreError();  // its receives end through Poll
  std::vector<RequestId> failed;
  for (const auto& [id, s] : sessions_) {
    if (s.connection == token) failed.push_back(id);
  }
  for (RequestId id : failed) End(id, UnavailableError(why.message()).WithContext("KV connection reset"), true);
}

void KvReceiver::ExpireStuckReceives(Nanos now) {
  std::set<std::string> stuck;
  for (const auto& [id, r] : receives_) {
    if (now - r.posted_at >= MsToNanos(config_.receive_timeout_ms) && connections_.count(r.connection) > 0) {
      stuck.insert(r.connection);
    }
  }
  for (const std::string& token : stuck) {
    ResetConnection(token, DeadlineExceededError(
                               fmt::format("a KV receive did not complete in {} ms", config_.receive_timeout_ms)));
  }
}

}  // namespace tandem::kv_transfer
