// The nccl backend's worker address, connection token and region descriptor on
// the wire, as plain C++ so that their validation is testable without a GPU or
// NCCL. Envelope: magic "TKVN", version 1, kind 1 (address), 2 (region) or 3
// (connection token); README.md has the layout.
// Thread rule: value types and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/status.h"
#include "kv_transfer/peer_process.h"

namespace tandem::kv_transfer {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
inline constexpr size_t kNcclDeviceUuidBytes = 16;

// What a target (decode) publishes: who and which GPU it is. The writer creates
// the communicator, so the address carries no NCCL id.
struct NcclAddress {
  ProcessIdentity process;
  uint64_t nonce = 0;       // names this transport instance
  std::string device_uuid;  // kNcclDeviceUuidBytes
};

// What the writer's Connect made, for the target's Accept: the pair
// communicator's unique id (the writer is rank 0, the target rank 1).
struct NcclToken {
  uint64_t writer_nonce = 0;
  uint64_t target_nonce = 0;  // the NcclAddress::nonce it was made for
  ProcessIdentity writer;
  std::string writer_device_uuid;  // kNcclDeviceUuidBytes
  std::string unique_id;           // kNcclUniqueIdBytes
  uint64_t chunk_bytes = 0;        // both ends cut batches into the same chunks
};

// A registered region: nothing is remotely addressable, so only its size (the
// writer bounds-checks against it) and its owner.
struct NcclRegion {
  uint64_t owner_nonce = 0;
  uint64_t length = 0;
};

std::string EncodeNcclAddress(const NcclAddress& address);
// InvalidArgument on malformed input; FailedPrecondition on another version.
StatusOr<NcclAddress> DecodeNcclAddress(std::string_view bytes);
std::string EncodeNcclToken(const NcclToken& token);
StatusOr<NcclToken> DecodeNcclToken(std::string_view bytes);
std::string EncodeNcclRegion(const NcclRegion& region);
StatusOr<NcclRegion> DecodeNcclRegion(std::string_view bytes);

}  // namespace tandem::kv_transfer
