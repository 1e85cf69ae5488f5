// LocalFabric: the "network" shared by the LocalTransports of one process. It
// keeps every transport's live registrations (one-sided writes are checked and
// copied against them under its lock) and, for two-sided transports, the
// channels: one per Connect, carrying write batches and receive batches that
// pair up in post order, like an NCCL pair communicator.
//
// Thread rule: thread-safe (transports on different threads share it). Must
// outlive its transports.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

class LocalFabric {
 public:
  struct Span {
    uint8_t* addr = nullptr;
    uint64_t length = 0;
  };
  // Where the bytes of a receive batch land: a range of one of the target's
  // regions, or nowhere (region == kInvalidHandle: discarded).
  struct Landing {
    RegionId region = kInvalidHandle;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  using Finished = std::vector<std::pair<TransferId, Status>>;

  // Returns a fresh transport id (> 0).
  uint64_t AddTransport();
  // Forgets its regions and closes its channels (their batches end Unavailable).
  void RemoveTransport(uint64_t transport);
  bool HasTransport(uint64_t transport);
  void AddRegion(uint64_t transport, RegionId region, Span span);
  void RemoveRegion(uint64_t transport, RegionId region);
  // Looks up a live region (false when the transport or region is gone).
  bool FindRegion(uint64_t transport, RegionId region, Span* span);
  // Copies into a live target region under the lock. NotFound when the region is
  // gone, InvalidArgument when the range leaves it.
  Status CopyTo(uint64_t transport, RegionId region, uint64_t offset, const uint8_t* src, uint64_t length);

  // Two-sided. A channel from `writer` to `target`; returns its id (> 0).
  uint64_t OpenChannel(uint64_t writer, uint64_t target);
  // True when the channel is open between these two transports.
  bool ChannelJoins(uint64_t channel, uint64_t writer, uint64_t target);
  // Queues a write batch (the writer's id `batch`; its source bytes, in order,
  // stay readable until it finishes) or a receive batch (the target's id).
  void PostSend(uint64_t channel, TransferId batch, std::vector<Span> source);
  void PostReceive(uint64_t channel, TransferId batch, std::vector<Landing> landing);
  // Executes every matched pair of `transport`'s channels and hands over the
  // batches of `transport` that finished.
  void Progress(uint64_t transport, Finished* finished);
  // Ends the channel: its unmatched batches finish with `why`, later ones too.
  void CloseChannel(uint64_t channel, const Status& why);

 private:
  struct Send {
    TransferId batch;
    std::vector<Span> source;
  };
  struct Receive {
    TransferId batch;
    std::vector<Landing> landing;
  };
  struct Channel {
    uint64_t writer = 0, target = 0;
    Status closed;  // non-OK once closed
    std::deque<Send> sends;
    std::deque<Receive> receives;
  };
  Status CopyPair(const Channel& c, const Send& send, const Receive& receive);  // REQUIRES mu_
  void CloseLocked(Channel& c, const Status& why);                              // REQUIRES mu_

  std::mutex mu_;
  uint64_t next_transport_ = 1;
  uint64_t next_channel_ = 1;
  std::map<uint64_t, std::map<RegionId, Span>> regions_;  // guarded by mu_
  std::map<uint64_t, Channel> channels_;                  // guarded by mu_
  std::map<uint64_t, Finished> finished_;                 // by owner transport; guarded by mu_
};

}  // namespace tandem::kv_transfer
