// UcxTransport: the `ucx` backend over the UCP API. One UCP context (RMA
// feature) and one worker per transport; host memory registered with
// ucp_mem_map, rkeys packed into the region descriptor; a peer is an endpoint
// created from its worker address; a batch is ucp_put_nbx per op followed by
// ucp_ep_flush_nbx, and completes when the flush does (the bytes are then
// visible in the target memory). Works over tcp and shared memory on loopback
// and over verbs where hardware exists. Debian's UCX has no CUDA support, so
// only host memory (decode's pinned landing buffer, prefill's staging buffer).
//
// Only built when pkg-config finds `ucx` (TANDEM_HAVE_UCX).
// Worker addresses are handed to ucp_ep_create after envelope checks only: they
// must come from an authenticated control plane (cluster token), never a client.
// Thread rule: not thread-safe (UCS_THREAD_MODE_SINGLE worker); one owner thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

struct UcxConfig {
  // UCX transport list (UCX_TLS syntax): "tcp", "shm", "rc,sm", ... Empty: UCX's
  // own choice (which honours the UCX_TLS environment variable).
  std::string transports;
  // Detect peer failure (UCP_ERR_HANDLING_MODE_PEER): in-flight puts to a dead
  // peer then fail with Unavailable instead of hanging. Turn off only for
  // transports that cannot support it.
  bool peer_error_handling = true;
  Status Validate() const;
};

class UcxTransport final : public Transport {
 public:
  static StatusOr<std::unique_ptr<UcxTransport>> Create(const UcxConfig& config);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  TransportCapabilities Capabilities() const override;
  std::string WorkerAddress() const override { return address_; }
  StatusOr<RegisteredRegion> RegisterMemory(void* addr, size_t length, MemoryKind kind) override;
  Status UnregisterMemory(RegionId region) override;
  StatusOr<PeerId> Connect(std::string_view worker_address) override;
  Status Disconnect(PeerId peer) override;
  StatusOr<RemoteRegionId> LoadRemoteRegion(PeerId peer, std::string_view descriptor) override;
  Status UnloadRemoteRegion(RemoteRegionId remote) override;
  StatusOr<TransferId> PostWrites(PeerId peer, std::span<const WriteOp> ops) override;
  StatusOr<TransferId> PostReceives(PeerId peer, std::span<const WriteOp> ops) override;
  void Cancel(TransferId id) override;
  size_t Poll(std::vector<TransferEvent>* events) override;
  // True once UCX reported the peer's endpoint failed (peer_error_handling on).
  bool PeerGone(PeerId peer) const override;

  struct Impl;  // UCX handles; defined in the .cc so ucp.h stays private

 private:
  explicit UcxTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string address_;
};

}  // namespace tandem::kv_transfer
