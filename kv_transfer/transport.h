// Transport: the small plugin contract that moves bytes between nodes for the
// KV handoff (NIXL-like). Backends: `local` (same process, memcpy; optionally
// two-sided for tests), `ucx` (host memory over tcp/shm/verbs, one-sided puts),
// `cuda_ipc` (device memory of another process on the same host, one-sided
// copies), `nccl` (two-sided send/recv, GPU to GPU). FaultTransport wraps any
// of them. README.md describes each backend's wire format.
//
// Model: a transport has a worker address (bytes a peer connects to) and
// registered memory regions. Registering returns a local handle plus a
// serialized remote descriptor that travels over the control plane; the other
// side loads it (per peer) and then posts batches of writes. Every successful
// PostWrites produces exactly one TransferEvent from Poll, carrying a Status,
// whatever happens (success, failure, Cancel, Disconnect, destruction excluded).
// Until that event arrives the backend may still read the local memory.
//
// Two-sided backends (Capabilities().one_sided == false) also need the target
// to post receives: the writer's Connect creates a connection, whose
// ConnectionToken the target passes to Accept; then the k-th write batch posted
// on the connection lands in the k-th receive batch the target posts on it.
//
// Thread rule: not thread-safe. One owner thread calls every method (the node's
// transport thread); nothing is called back from other threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/status.h"

namespace tandem::kv_transfer {

enum class MemoryKind : uint8_t { kHost = 0, kDevice = 1 };

struct TransportCapabilities {
  std::string backend;         // "local", "ucx", "fault(ucx)", ...
  bool device_memory = false;  // RegisterMemory accepts MemoryKind::kDevice
  // true: one-sided RMA; the target's CPU posts nothing per transfer (it only
  // progresses). false: two-sided; the target must PostReceives a mirror of
  // every batch (NCCL send/recv).
  bool one_sided = true;
  // true: bytes move only inside Poll, on both ends (UCX over shared memory or
  // tcp: the target's progress applies the data), so an owner thread that polls
  // on a timer caps the rate at what one Poll moves per tick; it should poll
  // without pause while transfers are active. false: the data moves by itself
  // (GPU copies, a memcpy per batch) and Poll only reports completions.
  bool progress_driven = false;
};

using RegionId = uint64_t;                     // a local registered region
using RemoteRegionId = uint64_t;               // a peer's region loaded from its descriptor
using PeerId = uint64_t;                       // a connected peer
using TransferId = uint64_t;                   // one posted batch
inline constexpr uint64_t kInvalidHandle = 0;  // no valid handle is 0

struct RegisteredRegion {
  RegionId id = kInvalidHandle;
  std::string descriptor;  // opaque, serialized; what a peer passes to LoadRemoteRegion
};

// One contiguous write: local [local_offset, +length) -> remote [remote_offset, +length).
struct WriteOp {
  RegionId local_region = kInvalidHandle;
  uint64_t local_offset = 0;
  RemoteRegionId remote_region = kInvalidHandle;
  uint64_t remote_offset = 0;
  uint64_t length = 0;
};

// Completion of one batch. status: OK when every byte is visible in the remote
// memory; Cancelled after Cancel; Unavailable when the peer is gone; other codes
// for backend errors. After the event the backend no longer touches local memory.
struct TransferEvent {
  TransferId id = kInvalidHandle;
  Status status;
  uint64_t bytes = 0;  // bytes in the batch
};

// The one bounds rule of every backend: [offset, offset + length) is a non-empty
// range inside a region of `region_length` bytes (overflow-safe). InvalidArgument
// naming `side` ("local", "remote") otherwise.
Status CheckRange(uint64_t offset, uint64_t length, uint64_t region_length, const char* side);
// Both ranges of a write: local against its registered region, remote against
// the peer's loaded region.
Status CheckWriteOpBounds(const WriteOp& op, uint64_t local_length, uint64_t remote_length);

class Transport {
 public:
  virtual ~Transport() = default;

  virtual TransportCapabilities Capabilities() const = 0;
  // Opaque bytes a peer passes to Connect.
  virtual std::string WorkerAddress() const = 0;

  // Registers [addr, addr+length). InvalidArgument for an empty range or a kind
  // the backend cannot register. The memory must outlive the registration.
  virtual StatusOr<RegisteredRegion> RegisterMemory(void* addr, size_t length, MemoryKind kind) = 0;
  // NotFound for an unknown id. REQUIRES: no transfer using it is in flight.
  virtual Status UnregisterMemory(RegionId region) = 0;

  // Connects to a peer from its WorkerAddress. Fails with InvalidArgument on a
  // malformed address, Unavailable when the peer cannot be reached.
  virtual StatusOr<PeerId> Connect(std::string_view worker_address) = 0;
  // Drops a peer: its in-flight batches end with Unavailable/Cancelled events and
  // its remote regions are unloaded.
  virtual Status Disconnect(PeerId peer) = 0;

  // Parses a peer's region descriptor (validated: never trusts the bytes).
  virtual StatusOr<RemoteRegionId> LoadRemoteRegion(PeerId peer, std::string_view descriptor) = 0;
  virtual Status UnloadRemoteRegion(RemoteRegionId remote) = 0;

  // Posts a batch of writes to one peer. Bounds and handles are checked first
  // (InvalidArgument, nothing posted). On success exactly one TransferEvent follows.
  // Two-sided: the remote ranges are bounds-checked against the loaded region,
  // but where the bytes land is what the target's matching receive batch says.
  virtual StatusOr<TransferId> PostWrites(PeerId peer, std::span<const WriteOp> ops) = 0;
  // Two-sided backends only: the target posts the receive batch that pairs with
  // the next write batch of `peer` (an Accept-ed connection), in the writer's
  // post order. Ops name local ranges (local_region, local_offset, length; the
  // remote fields are ignored); the write batch's bytes, concatenated in op
  // order, fill them in op order, so the two sides may split the bytes
  // differently. An op with local_region == kInvalidHandle discards its length
  // (keeps the connection in step for a batch nobody wants any more).
  // REQUIRES: the total equals the write batch's (the receiver learns it over the
  // control plane). Its event says the bytes have landed. One-sided backends
  // return FailedPrecondition.
  virtual StatusOr<TransferId> PostReceives(PeerId peer, std::span<const WriteOp> ops) = 0;

  // Two-sided backends only: bytes that let the target join the connection made
  // by Connect(peer) (for NCCL: the pair communicator's unique id). They travel
  // over the control plane like worker addresses. One-sided: FailedPrecondition.
  virtual StatusOr<std::string> ConnectionToken(PeerId peer) const;
  // Two-sided backends only, the target side: joins the connection a writer's
  // ConnectionToken describes and returns it as a peer for PostReceives.
  // Validates the token (InvalidArgument). One-sided: FailedPrecondition.
  virtual StatusOr<PeerId> Accept(std::string_view token);

  // Asks a batch to stop. Its event (status Cancelled unless it already finished)
  // still arrives through Poll, possibly later: once the backend has let go of the
  // memory. Unknown or finished ids are ignored.
  virtual void Cancel(TransferId id) = 0;

  // Drives progress (never blocks) and appends finished batches to `events`.
  // Returns the number appended.
  virtual size_t Poll(std::vector<TransferEvent>* events) = 0;

  // OK, or why the transport can no longer be trusted (a sticky device error, a
  // connection abort that did not return in time). Not OK is permanent: the node
  // reports itself unhealthy and should be restarted.
  virtual Status Health() const { return Status::Ok(); }

  // True once this transport knows the peer's process or endpoint is gone (as
  // of the last Poll). Its loaded regions may keep the peer's memory alive (a
  // CUDA IPC mapping holds the dead process's allocation), so the owner should
  // Disconnect it. False for unknown ids and where a backend cannot tell.
  virtual bool PeerGone(PeerId /*peer*/) const { return false; }
};

}  // namespace tandem::kv_transfer
