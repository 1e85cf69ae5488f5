#include "kv_transfer/fault/fault_transport.h"

#include <utility>

namespace tandem::kv_transfer {

Status FaultConfig::Validate() const {
  if (delay_ms < 0) return InvalidArgumentError("fault delay_ms must be >= 0");
  return Status::Ok();
}

FaultTransport::FaultTransport(std::unique_ptr<Transport> inner, const FaultConfig& config, Clock& clock)
    : inner_(std::move(inner)), config_(config), clock_(clock) {
  TANDEM_CHECK(inner_ != nullptr);
  TANDEM_CHECK_OK(config.Validate());
}

TransportCapabilities FaultTransport::Capabilities() const {
  TransportCapabilities caps = inner_->Capabilities();
  caps.backend = "fault(" + caps.backend + ")";
  return caps;
}

StatusOr<PeerId> FaultTransport::Connect(std::string_view worker_address) {
  if (partitioned_) return UnavailableError("injected partition: peer unreachable");
  return inner_->Connect(worker_address);
}

Status FaultTransport::Disconnect(PeerId peer) {
  // Dropped batches to this peer end now; forwarded ones end through the inner transport.
  for (auto it = batches_.begin(); it != batches_.end();) {
    if (it->second.peer == peer && it->second.fate == Fate::kDropped) {
      ready_.push_back(TransferEvent{it->first, UnavailableError("peer disconnected"), it->second.bytes});
      it = batches_.erase(it);
    } else {
      ++it;
    }
  }
  return inner_->Disconnect(peer);
}

StatusOr<TransferId> FaultTransport::PostWrites(PeerId peer, std::span<const WriteOp> ops) {
  uint64_t bytes = 0;
  for (const WriteOp& op : ops) bytes += op.length;
  uint64_t n = stats_.batches_posted + 1;
  bool fail = (config_.fail_every_nth > 0 && n % config_.fail_every_nth == 0) ||
              (config_.fail_after_bytes > 0 && stats_.bytes_posted + bytes > config_.fail_after_bytes);
  bool drop = partitioned_ || (config_.drop_every_nth > 0 && n % config_.drop_every_nth == 0);
  TransferId id = next_id_++;
  if (fail) {
    ready_.push_back(TransferEvent{id, UnavailableError("injected transfer failure"), bytes});
    ++stats_.batches_failed;
  } else if (drop) {
    batches_[id] = Batch{Fate::kDropped, peer, kInvalidHandle, bytes};
    ++stats_.batches_dropped;
  } else {
    TANDEM_ASSIGN_OR_RETURN(TransferId inner_id, inner_->PostWrites(peer, ops));
    batches_[id] = Batch{Fate::kForwarded, peer, inner_id, bytes};
    by_inner_[inner_id] = id;
  }
  ++stats_.batches_posted;
  stats_.bytes_posted += bytes;
  return id;
}

StatusOr<TransferId> FaultTransport::PostReceives(PeerId peer, std::span<const WriteOp> ops) {
  uint64_t bytes = 0;
  for (const WriteOp& op : ops) bytes += op.length;
  TANDEM_ASSIGN_OR_RETURN(TransferId inner_id, inner_->PostReceives(peer, ops));
  TransferId id = next_id_++;
  batches_[id] = Batch{Fate::kForwarded, peer, inner_id, bytes};
  by_inner_[inner_id] = id;
  return id;
}

void FaultTransport::Cancel(TransferId id) {
  auto it = batches_.find(id);
  if (it == batches_.end()) return;
  if (it->second.fate == Fate::kForwarded) {
    inner_->Cancel(it->second.inner_id);
    return;
  }
  if (config_.cancel_ignored) return;
  ready_.push_back(TransferEvent{id, CancelledError("transfer cancelled"), it->second.bytes});
  batches_.erase(it);
}

size_t FaultTransport::Poll(std::vector<TransferEvent>* events) {
  size_t before = events->size();
  std::vector<TransferEvent> inner_events;
  inner_->Poll(&inner_events);
  Nanos now = clock_.NowNanos();
  for (TransferEvent& e : inner_events) {
    auto it = by_inner_.find(e.id);
    if (it == by_inner_.end()) continue;  // not ours (posted on the inner transport directly)
    TransferId outer = it->second;
    by_inner_.erase(it);
    batches_.erase(outer);
    e.id = outer;
    held_.push_back(Held{now + MsToNanos(config_.delay_ms), std::move(e)});
  }
  while (!ready_.empty()) {
    events->push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  // Release every due event (not only a due prefix: delay_ms may have changed).
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->release_at <= now) {
      events->push_back(std::move(it->event));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  return events->size() - before;
}

}  // namespace tandem::kv_transfer
