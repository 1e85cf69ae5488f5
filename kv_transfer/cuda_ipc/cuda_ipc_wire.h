// The cuda_ipc backend's worker address and region descriptor on the wire, as
// plain C++ so that their validation is testable without a GPU. Envelope: magic
// "TKVC", version 1, kind 1 (address) or 2 (region); README.md has the layout.
// Thread rule: value types and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/status.h"
#include "kv_transfer/peer_process.h"

namespace tandem::kv_transfer {

inline constexpr size_t kCudaIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t)
inline constexpr size_t kDeviceUuidBytes = 16;     // sizeof(cudaUUID_t)

struct CudaIpcAddress {
  ProcessIdentity process;
  uint64_t nonce = 0;       // names this transport instance; its descriptors carry it
  std::string device_uuid;  // kDeviceUuidBytes: the GPU its regions live on
};

struct CudaIpcRegion {
  uint64_t owner_nonce = 0;       // the exporting transport (CudaIpcAddress::nonce)
  std::string ipc_handle;         // kCudaIpcHandleBytes: cudaIpcMemHandle_t of the allocation
  uint64_t allocation_bytes = 0;  // size of that cudaMalloc allocation
  uint64_t offset = 0;            // the region's start inside the allocation
  uint64_t length = 0;            // the region's bytes; offset + length <= allocation_bytes
};

std::string EncodeCudaIpcAddress(const CudaIpcAddress& address);
// InvalidArgument on a malformed, truncated or out-of-range encoding;
// FailedPrecondition on another version.
StatusOr<CudaIpcAddress> DecodeCudaIpcAddress(std::string_view bytes);

std::string EncodeCudaIpcRegion(const CudaIpcRegion& region);
StatusOr<CudaIpcRegion> DecodeCudaIpcRegion(std::string_view bytes);

}  // namespace tandem::kv_transfer
