#include "kv_transfer/local/local_fabric.h"

#include <fmt/format.h>

#include <cstring>

namespace tandem::kv_transfer {

uint64_t LocalFabric::AddTransport() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_transport_++;
  regions_[id];
  return id;
}

void LocalFabric::RemoveTransport(uint64_t transport) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_.erase(transport);
  for (auto it = channels_.begin(); it != channels_.end();) {
    Channel& c = it->second;
    if (c.writer == transport || c.target == transport) CloseLocked(c, UnavailableError("local peer is gone"));
    bool orphan = regions_.count(c.writer) == 0 && regions_.count(c.target) == 0;
    it = orphan ? channels_.erase(it) : std::next(it);
  }
  finished_.erase(transport);
}

bool LocalFabric::HasTransport(uint64_t transport) {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.count(transport) > 0;
}

void LocalFabric::AddRegion(uint64_t transport, RegionId region, Span span) {
  std::lock_guard<std::mutex> lock(mu_);
  regions_[transport][region] = span;
}

void LocalFabric::RemoveRegion(uint64_t transport, RegionId region) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(transport);
  if (it != regions_.end()) it->second.erase(region);
}

bool LocalFabric::FindRegion(uint64_t transport, RegionId region, Span* span) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(transport);
  if (it == regions_.end()) return false;
  auto r = it->second.find(region);
  if (r == it->second.end()) return false;
  *span = r->second;
  return true;
}

Status LocalFabric::CopyTo(uint64_t transport, RegionId region, uint64_t offset, const uint8_t* src, uint64_t length) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = regions_.find(transport);
  if (it == regions_.end()) return UnavailableError("local peer is gone");
  auto r = it->second.find(region);
  if (r == it->second.end()) return NotFoundError("remote region was unregistered");
  if (offset > r->second.length || length > r->second.length - offset) {
    return InvalidArgumentError("write leaves the remote region");
  }
  std::memcpy(r->second.addr + offset, src, length);
  return Status::Ok();
}

uint64_t LocalFabric::OpenChannel(uint64_t writer, uint64_t target) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_channel_++;
  channels_[id] = Channel{writer, target, Status::Ok(), {}, {}};
  return id;
}

bool LocalFabric::ChannelJoins(uint64_t channel, uint64_t writer, uint64_t target) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = channels_.find(channel);
  return it != channels_.end() && it->second.closed.ok() && it->second.writer == writer && it->second.target == target;
}

void LocalFabric::PostSend(uint64_t channel, TransferId batch, std::vector<Span> source) {
  std::lock_guard<std::mutex> lock(mu_);
  Channel& c = channels_.at(channel);
  if (!c.closed.ok()) {
    finished_[c.writer].emplace_back(batch, c.closed);
    return;
  }
  c.sends.push_back(Send{batch, std::move(source)});
}

void LocalFabric::PostReceive(uint64_t channel, TransferId batch, std::vector<Landing> landing) {
  std::lock_guard<std::mutex> lock(mu_);
  Channel& c = channels_.at(channel);
  if (!c.closed.ok()) {
    finished_[c.target].emplace_back(batch, c.closed);
    return;
  }
  c.receives.push_back(Receive{batch, std::move(landing)});
}

Status LocalFabric::CopyPair(const Channel& c, const Send& send, const Receive& receive) {
  uint64_t sent = 0, expected = 0;
  for (const Span& s : send.source) sent += s.length;
  for (const Landing& l : receive.landing) expected += l.length;
  if (sent != expected) {
    return InvalidArgumentError(fmt::format("a {}-byte write batch met a {}-byte receive batch", sent, expected));
  }
  auto target = regions_.find(c.target);
  if (target == regions_.end()) return UnavailableError("local peer is gone");
  std::vector<uint8_t*> dst(receive.landing.size(), nullptr);
  for (size_t i = 0; i < receive.landing.size(); ++i) {
    const Landing& l = receive.landing[i];
    if (l.region == kInvalidHandle) continue;  // discarded
    auto r = target->second.find(l.region);
    if (r == target->second.end()) return NotFoundError("receive region was unregistered");
    TANDEM_RETURN_IF_ERROR(CheckRange(l.offset, l.length, r->second.length, "receive"));
    dst[i] = r->second.addr + l.offset;
  }
  // The write batch's bytes, in op order, fill the receive ranges in op order.
  size_t si = 0, ri = 0;
  uint64_t s_off = 0, r_off = 0;
  while (si < send.source.size() && ri < receive.landing.size()) {
    uint64_t n = std::min(send.source[si].length - s_off, receive.landing[ri].length - r_off);
    if (dst[ri] != nullptr) std::memcpy(dst[ri] + r_off, send.source[si].addr + s_off, n);
    s_off += n;
    r_off += n;
    if (s_off == send.source[si].length) ++si, s_off = 0;
    if (r_off == receive.landing[ri].length) ++ri, r_off = 0;
  }
  return Status::Ok();
}

void LocalFabric::Progress(uint64_t transport, Finished* finished) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : channels_) {
    if (c.writer != transport && c.target != transport) continue;
    while (c.closed.ok() && !c.sends.empty() && !c.receives.empty()) {
      Status st = CopyPair(c, c.sends.front(), c.receives.front());
      finished_[c.writer].emplace_back(c.sends.front().batch, st);
      finished_[c.target].emplace_back(c.receives.front().batch, st);
      c.sends.pop_front();
      c.receives.pop_front();
    }
  }
  auto it = finished_.find(transport);
  if (it == finished_.end()) return;
  for (auto& f : it->second) finished->push_back(std::move(f));
  it->second.clear();
}

void LocalFabric::CloseChannel(uint64_t channel, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = channels_.find(channel);
  if (it != channels_.end()) CloseLocked(it->second, why);
}

void LocalFabric::CloseLocked(Channel& c, const Status& why) {
  if (!c.closed.ok()) return;
  c.closed = why;
  for (const Send& s : c.sends) finished_[c.writer].emplace_back(s.batch, why);
  for (const Receive& r : c.receives) finished_[c.target].emplace_back(r.batch, why);
  c.sends.clear();
  c.receives.clear();
}

}  // namespace tandem::kv_transfer
