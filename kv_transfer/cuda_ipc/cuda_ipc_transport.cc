#include "kv_transfer/cuda_ipc/cuda_ipc_transport.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <utility>

#include "common/cuda/cuda_status.h"
#include "common/kernels/kv_run_copy.h"
#include "kv_transfer/cuda_ipc/cuda_ipc_wire.h"
#include "kv_transfer/peer_process.h"

namespace tandem::kv_transfer {
namespace {

using SteadyClock = std::chrono::steady_clock;
using GetAddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// Makes `device` current for the scope and restores the caller's device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = device;
    if (previous_ != device_) cudaSetDevice(device_);
  }
  ~DeviceScope() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int device_;
  int previous_ = 0;
};

std::string HexUuid(const std::string& uuid) {
  std::string out;
  for (unsigned char c : uuid) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace

struct CudaIpcTransport::Impl {
  struct Region {
    std::byte* addr = nullptr;
    uint64_t length = 0;
  };
  struct Peer {
    CudaIpcAddress address;
    ProcessWatch watch;
    bool gone = false;  // its process exited
  };
  // One opened allocation of a peer, shared by its remote regions and the
  // batches in flight that write into it.
  struct Mapping {
    std::byte* base = nullptr;
    int refs = 0;
  };
  struct Remote {
    PeerId peer;
    std::string handle;  // Mapping key
    uint64_t offset, length;
  };
  struct Batch {
    TransferId id = kInvalidHandle;
    PeerId peer = kInvalidHandle;
    cudaEvent_t event = nullptr;
    uint64_t bytes = 0;
    bool cancelled = false;
    Status forced;                     // non-OK: the batch ends with this
    std::vector<std::string> handles;  // Mapping refs it holds
  };

  CudaIpcConfig config;
  ProcessIdentity self;
  uint64_t nonce = 0;
  std::vector<std::string> device_uuids;  // per visible device ordinal
  std::string address;
  GetAddressRangeFn get_address_range = nullptr;
  // Batches take these in turn, so one layer's copy kernel starts while the
  // previous one drains its last thread blocks (one stream serializes them).
  std::vector<cudaStream_t> streams;
  size_t next_stream = 0;
  std::unique_ptr<kernels::RunCopyParams> runs = std::make_unique<kernels::RunCopyParams>();
  uint64_t next_handle = 1;
  std::map<RegionId, Region> regions;
  std::map<PeerId, Peer> peers;
  std::map<std::string, Mapping> mappings;  // by cudaIpcMemHandle bytes
  std::map<RemoteRegionId, Remote> remotes;
  std::deque<Batch> batches;  // in posting order; reported in that order
  std::vector<cudaEvent_t> spare_events;
  SteadyClock::time_point next_liveness_check{};
  Status broken;  // sticky: the first CUDA error that is not "not ready"

  Status Break(Status st) {
    if (broken.ok()) broken = InternalError(st.message()).WithContext("cuda_ipc transport broken");
    return broken;
  }
  void Release(const std::string& handle) {
    auto it = mappings.find(handle);
    if (it == mappings.end() || --it->second.refs > 0) return;
    cudaIpcCloseMemHandle(it->second.base);
    mappings.erase(it);
  }
  // The allocation containing `ptr`: base and size (driver API, reached through
  // the runtime so the library needs no libcuda link).
  Status AddressRange(const void* ptr, std::byte** base, uint64_t* size) const {
    CUdeviceptr b = 0;
    size_t n = 0;
    CUresult r = get_address_range(&b, &n, reinterpret_cast<CUdeviceptr>(ptr));
    if (r != CUDA_SUCCESS) {
      return InvalidArgumentError(fmt::format("cuMemGetAddressRange failed ({})", static_cast<int>(r)));
    }
    *base = reinterpret_cast<std::byte*>(b);
    *size = n;
    return Status::Ok();
  }
  void CheckLiveness() {
    SteadyClock::time_point now = SteadyClock::now();
    if (now < next_liveness_check) return;
    next_liveness_check = now + std::chrono::milliseconds(config.liveness_interval_ms);
    for (auto& [id, peer] : peers) {
      if (peer.gone || !peer.watch.Exited()) continue;
      peer.gone = true;
      for (Batch& b : batches) {
        if (b.peer == id && b.forced.ok()) b.forced = UnavailableError("cuda_ipc peer process exited");
      }
    }
  }
  // One op resolved to device addresses.
  struct Copy {
    const std::byte* src;
    std::byte* dst;
    uint64_t bytes;
  };
  std::vector<Copy> copies;  // PostWrites' scratch

  // Queues every copy on `stream`; returns the first CUDA error.
  Status Issue(cudaStream_t stream) {
    kernels::RunCopyParams& p = *runs;
    p.count = 0;
    for (const Copy& c : copies) {
      if (c.bytes >= config.copy_engine_min_bytes) {
        TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, stream));
        continue;
      }
      p.src[p.count] = c.src;
      p.dst[p.count] = c.dst;
      p.bytes[p.count] = static_cast<int64_t>(c.bytes);
      if (++p.count == kernels::kRunCopyMaxRuns) {
        TANDEM_RETURN_IF_ERROR(kernels::LaunchRunCopy(p, stream));
        p.count = 0;
      }
    }
    return p.count > 0 ? kernels::LaunchRunCopy(p, stream) : Status::Ok();
  }
};

Status CudaIpcConfig::Validate() const {
  if (device < 0) return InvalidArgumentError("cuda_ipc: device must be >= 0");
  if (copy_engine_min_bytes == 0) return InvalidArgumentError("cuda_ipc: copy_engine_min_bytes must be > 0");
  if (liveness_interval_ms < 0) return InvalidArgumentError("cuda_ipc: liveness_interval_ms must be >= 0");
  if (streams < 1 || streams > 8) return InvalidArgumentError("cuda_ipc: streams must be in [1, 8]");
  return Status::Ok();
}

CudaIpcTransport::CudaIpcTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<CudaIpcTransport>> CudaIpcTransport::Create(const CudaIpcConfig& config) {
  TANDEM_RETURN_IF_ERROR(config.Validate());
  const int devices = cuda::DeviceCount();
  if (config.device >= devices) {
    return FailedPreconditionError(
        fmt::format("cuda_ipc: CUDA device {} is not visible ({} devices)", config.device, devices));
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  TANDEM_ASSIGN_OR_RETURN(impl->self, SelfIdentity());
  std::random_device rd;
  while (impl->nonce == 0) impl->nonce = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  for (int d = 0; d < devices; ++d) {
    cudaDeviceProp prop;
    TANDEM_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, d));
    impl->device_uuids.emplace_back(prop.uuid.bytes, kDeviceUuidBytes);
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found));
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    return InternalError("cuda_ipc: the driver has no cuMemGetAddressRange");
  }
  impl->get_address_range = reinterpret_cast<GetAddressRangeFn>(fn);
  std::unique_ptr<CudaIpcTransport> t(new CudaIpcTransport(std::move(impl)));
  Impl& m = *t->impl_;
  DeviceScope scope(config.device);
  for (int i = 0; i < config.streams; ++i) {
    cudaStream_t stream = nullptr;
    TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    m.streams.push_back(stream);
  }
  m.address = EncodeCudaIpcAddress(
      CudaIpcAddress{.process = m.self, .nonce = m.nonce, .device_uuid = m.device_uuids[config.device]});
  return t;
}

CudaIpcTransport::~CudaIpcTransport() {
  Impl& m = *impl_;
  DeviceScope scope(m.config.device);
  for (cudaStream_t s : m.streams) cudaStreamSynchronize(s);
  for (const Impl::Batch& b : m.batches) cudaEventDestroy(b.event);
  for (cudaEvent_t e : m.spare_events) cudaEventDestroy(e);
  for (auto& [handle, mapping] : m.mappings) cudaIpcCloseMemHandle(mapping.base);
  for (cudaStream_t s : m.streams) cudaStreamDestroy(s);
}

TransportCapabilities CudaIpcTransport::Capabilities() const {
  return TransportCapabilities{.backend = "cuda_ipc", .device_memory = true, .one_sided = true};
}

std::string CudaIpcTransport::WorkerAddress() const { return impl_->address; }

StatusOr<RegisteredRegion> CudaIpcTransport::RegisterMemory(void* addr, size_t length, MemoryKind kind) {
  Impl& m = *impl_;
  if (addr == nullptr || length == 0) return InvalidArgumentError("empty memory region");
  if (kind != MemoryKind::kDevice) return InvalidArgumentError("cuda_ipc transport: device memory only");
  DeviceScope scope(m.config.device);
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, addr) != cudaSuccess || attr.type != cudaMemoryTypeDevice ||
      attr.device != m.config.device) {
    cudaGetLastError();
    return InvalidArgumentError(
        fmt::format("cuda_ipc: {} is not device memory of CUDA device {}", addr, m.config.device));
  }
  std::byte* base = nullptr;
  uint64_t size = 0;
  TANDEM_RETURN_IF_ERROR(m.AddressRange(addr, &base, &size));
  const uint64_t offset = static_cast<uint64_t>(static_cast<std::byte*>(addr) - base);
  TANDEM_RETURN_IF_ERROR(
      CheckRange(offset, length, size, "cuda_ipc region").WithContext("region leaves its allocation"));
  cudaIpcMemHandle_t handle;
  cudaError_t err = cudaIpcGetMemHandle(&handle, base);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return InvalidArgumentError(fmt::format("cuda_ipc: allocation is not IPC-exportable (cudaMalloc memory only): {}",
                                            cudaGetErrorString(err)));
  }
  RegionId id = m.next_handle++;
  m.regions[id] = Impl::Region{static_cast<std::byte*>(addr), length};
  std::string descriptor = EncodeCudaIpcRegion(
      CudaIpcRegion{.owner_nonce = m.nonce,
                    .ipc_handle = std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)),
                    .allocation_bytes = size,
                    .offset = offset,
                    .length = length});
  return RegisteredRegion{id, std::move(descriptor)};
}

Status CudaIpcTransport::UnregisterMemory(RegionId region) {
  if (impl_->regions.erase(region) == 0) return NotFoundError("unknown local region");
  return Status::Ok();
}

StatusOr<PeerId> CudaIpcTransport::Connect(std::string_view worker_address) {
  Impl& m = *impl_;
  TANDEM_ASSIGN_OR_RETURN(CudaIpcAddress peer, DecodeCudaIpcAddress(worker_address));
  if (!m.self.SameHost(peer.process)) {
    return FailedPreconditionError(
        fmt::format("cuda_ipc: the peer runs on another host (boot id {}, this host {}); use nccl or ucx across hosts",
                    peer.process.boot_id, m.self.boot_id));
  }
  if (peer.nonce == m.nonce || (m.self.SamePidNamespace(peer.process) && peer.process.pid == m.self.pid)) {
    return FailedPreconditionError(
        "cuda_ipc: cannot connect to its own process (CUDA IPC handles do not open "
        "in the exporting process)");
  }
  int peer_device = -1;
  for (size_t d = 0; d < m.device_uuids.size(); ++d) {
    if (m.device_uuids[d] == peer.device_uuid) peer_device = static_cast<int>(d);
  }
  if (peer_device < 0) {
    return FailedPreconditionError(
        fmt::format("cuda_ipc: the peer's GPU {} is not visible to this process", HexUuid(peer.device_uuid)));
  }
  if (peer_device != m.config.device) {
    int can = 0;
    TANDEM_RETURN_IF_CUDA_ERROR(cudaDeviceCanAccessPeer(&can, m.config.device, peer_device));
    if (!can) {
      return FailedPreconditionError(
          fmt::format("cuda_ipc: no peer-to-peer path from CUDA device {} to {}", m.config.device, peer_device));
    }
    DeviceScope scope(m.config.device);
    cudaError_t err = cudaDeviceEnablePeerAccess(peer_device, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
    } else if (err != cudaSuccess) {
      return cuda::CudaStatus(err, "cudaDeviceEnablePeerAccess");
    }
  }
  TANDEM_ASSIGN_OR_RETURN(ProcessWatch watch, ProcessWatch::Open(m.self, peer.process));
  PeerId id = m.next_handle++;
  m.peers.emplace(id, Impl::Peer{std::move(peer), std::move(watch), false});
  return id;
}

Status CudaIpcTransport::Disconnect(PeerId peer) {
  Impl& m = *impl_;
  if (m.peers.erase(peer) == 0) return NotFoundError("unknown peer");
  DeviceScope scope(m.config.device);
  for (auto it = m.remotes.begin(); it != m.remotes.end();) {
    if (it->second.peer == peer) {
      m.Release(it->second.handle);
      it = m.remotes.erase(it);
    } else {
      ++it;
    }
  }
  for (Impl::Batch& b : m.batches) {
    if (b.peer == peer && b.forced.ok()) b.forced = UnavailableError("peer disconnected");
  }
  return Status::Ok();
}

StatusOr<RemoteRegionId> CudaIpcTransport::LoadRemoteRegion(PeerId peer, std::string_view descriptor) {
  Impl& m = *impl_;
  auto p = m.peers.find(peer);
  if (p == m.peers.end()) return NotFoundError("unknown peer");
  if (p->second.gone) return UnavailableError("cuda_ipc peer process exited");
  TANDEM_ASSIGN_OR_RETURN(CudaIpcRegion region, DecodeCudaIpcRegion(descriptor));
  if (region.owner_nonce != p->second.address.nonce) {
    return InvalidArgumentError("cuda_ipc: descriptor belongs to another peer");
  }
  auto mapping = m.mappings.find(region.ipc_handle);
  if (mapping == m.mappings.end()) {
    DeviceScope scope(m.config.device);
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, region.ipc_handle.data(), sizeof(handle));
    void* ptr = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return UnavailableError(
          fmt::format("cuda_ipc: cannot open the peer's memory handle: {}", cudaGetErrorString(err)));
    }
    std::byte* base = nullptr;
    uint64_t size = 0;
    Status st = m.AddressRange(ptr, &base, &size);
    if (st.ok() && (base != ptr || size < region.allocation_bytes)) {
      st = InvalidArgumentError(fmt::format("cuda_ipc: descriptor claims a {}-byte allocation, the handle maps {}",
                                            region.allocation_bytes, size));
    }
    if (!st.ok()) {
      cudaIpcCloseMemHandle(ptr);
      return st;
    }
    mapping = m.mappings.emplace(region.ipc_handle, Impl::Mapping{base, 0}).first;
  }
  ++mapping->second.refs;
  RemoteRegionId id = m.next_handle++;
  m.remotes[id] = Impl::Remote{peer, region.ipc_handle, region.offset, region.length};
  return id;
}

bool CudaIpcTransport::PeerGone(PeerId peer) const {
  auto p = impl_->peers.find(peer);
  return p != impl_->peers.end() && p->second.gone;
}

Status CudaIpcTransport::UnloadRemoteRegion(RemoteRegionId remote) {
  Impl& m = *impl_;
  auto it = m.remotes.find(remote);
  if (it == m.remotes.end()) return NotFoundError("unknown remote region");
  DeviceScope scope(m.config.device);
  m.Release(it->second.handle);
  m.remotes.erase(it);
  return Status::Ok();
}

StatusOr<TransferId> CudaIpcTransport::PostWrites(PeerId peer, std::span<const WriteOp> ops) {
  Impl& m = *impl_;
  TANDEM_RETURN_IF_ERROR(m.broken);
  auto p = m.peers.find(peer);
  if (p == m.peers.end()) return NotFoundError("unknown peer");
  if (p->second.gone) return UnavailableError("cuda_ipc peer process exited");
  // Resolve every op first (nothing is queued unless all pass); consecutive ops
  // mostly share their regions, so lookups are cached across them.
  uint64_t bytes = 0;
  std::vector<std::string> handles;
  m.copies.clear();
  const Impl::Region* local = nullptr;
  const Impl::Remote* remote = nullptr;
  std::byte* remote_base = nullptr;
  RegionId local_id = kInvalidHandle;
  RemoteRegionId remote_id = kInvalidHandle;
  for (const WriteOp& op : ops) {
    if (local == nullptr || op.local_region != local_id) {
      auto l = m.regions.find(op.local_region);
      if (l == m.regions.end()) return InvalidArgumentError("unknown local region in write");
      local = &l->second;
      local_id = op.local_region;
    }
    if (remote == nullptr || op.remote_region != remote_id) {
      auto rm = m.remotes.find(op.remote_region);
      if (rm == m.remotes.end() || rm->second.peer != peer) {
        return InvalidArgumentError("unknown remote region in write");
      }
      remote = &rm->second;
      remote_id = op.remote_region;
      remote_base = m.mappings.at(remote->handle).base + remote->offset;
      if (std::find(handles.begin(), handles.end(), remote->handle) == handles.end()) {
        handles.push_back(remote->handle);
      }
    }
    TANDEM_RETURN_IF_ERROR(CheckWriteOpBounds(op, local->length, remote->length));
    m.copies.push_back(Impl::Copy{local->addr + op.local_offset, remote_base + op.remote_offset, op.length});
    bytes += op.length;
  }
  DeviceScope scope(m.config.device);
  cudaEvent_t event = nullptr;
  if (!m.spare_events.empty()) {
    event = m.spare_events.back();
    m.spare_events.pop_back();
  } else {
    cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err != cudaSuccess) return m.Break(cuda::CudaStatus(err, "cudaEventCreateWithFlags"));
  }
  cudaStream_t stream = m.streams[m.next_stream];
  m.next_stream = (m.next_stream + 1) % m.streams.size();
  Status issued = m.Issue(stream);
  if (issued.ok()) issued = cuda::CudaStatus(cudaEventRecord(event, stream), "cudaEventRecord");
  if (!issued.ok()) {
    // Whatever was queued must finish before the caller may reuse its memory.
    cudaStreamSynchronize(stream);
    cudaEventDestroy(event);
    return m.Break(issued);
  }
  TransferId id = m.next_handle++;
  for (const std::string& h : handles) ++m.mappings.at(h).refs;
  Impl::Batch batch;
  batch.id = id;
  batch.peer = peer;
  batch.event = event;
  batch.bytes = bytes;
  batch.handles = std::move(handles);
  m.batches.push_back(std::move(batch));
  return id;
}

StatusOr<TransferId> CudaIpcTransport::PostReceives(PeerId, std::span<const WriteOp>) {
  return FailedPreconditionError("cuda_ipc transport is one-sided: no receives to post");
}

void CudaIpcTransport::Cancel(TransferId id) {
  for (Impl::Batch& b : impl_->batches) {
    if (b.id == id) b.cancelled = true;
  }
}

size_t CudaIpcTransport::Poll(std::vector<TransferEvent>* events) {
  Impl& m = *impl_;
  m.CheckLiveness();
  size_t before = events->size();
  DeviceScope scope(m.config.device);
  while (!m.batches.empty()) {
    Impl::Batch& b = m.batches.front();
    Status st;
    if (m.broken.ok()) {
      cudaError_t err = cudaEventQuery(b.event);
      if (err == cudaErrorNotReady) break;  // reported in posting order
      if (err != cudaSuccess) m.Break(cuda::CudaStatus(err, "cudaEventQuery")).IgnoreError();
    }
    if (!m.broken.ok()) {
      st = m.broken;
    } else if (!b.forced.ok()) {
      st = b.forced;
    } else if (b.cancelled) {
      st = CancelledError("transfer cancelled (its copies had been queued and completed)");
    }
    events->push_back(TransferEvent{b.id, std::move(st), b.bytes});
    for (const std::string& h : b.handles) m.Release(h);
    if (m.broken.ok()) {
      m.spare_events.push_back(b.event);
    } else {
      cudaEventDestroy(b.event);
    }
    m.batches.pop_front();
  }
  return events->size() - before;
}

Status CudaIpcTransport::Health() const { return impl_->broken; }

}  // namespace tandem::kv_transfer
