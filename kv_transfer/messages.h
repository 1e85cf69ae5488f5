// The kv_transfer wire objects, carried as opaque bytes by the control plane:
//   KvTarget        decode -> prefill (inside the Reserve answer): where to write
//   ControlMessage  either direction: Hello, LayerDone, KvDone, Abort
// Encodings are versioned (kProtocolVersion), size-capped and fully validated
// on parse: a peer's bytes are never trusted. README.md documents the format.
// Thread rule: plain value types and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/ids.h"
#include "common/base/log_limiter.h"
#include "common/base/status.h"
#include "common/kv_cache/kv_layout.h"

namespace tandem::kv_transfer {

inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kMaxMessageBytes = 1 << 20;      // any encoded object
inline constexpr size_t kMaxBlocksPerSession = 1 << 16;  // target blocks of one request
inline constexpr size_t kMaxAddressBytes = 16 << 10;     // worker address / descriptor
inline constexpr size_t kMaxModelIdBytes = 256;
inline constexpr size_t kMaxReasonBytes = 1024;
inline constexpr uint32_t kMaxLeaseMs = 3'600'000;

// Decode's answer to "where do I write the KV of request R?".
struct KvTarget {
  RequestId request_id = 0;
  Epoch epoch = 0;
  std::string model_id;
  kv_cache::KvLayout layout;      // decode's landing pool (num_blocks = its size)
  std::string worker_address;     // decode transport's WorkerAddress
  std::string region_descriptor;  // decode's landing region (RegisteredRegion::descriptor)
  uint64_t region_offset = 0;     // byte offset of (layer 0, block 0) inside the region
  std::vector<BlockId> blocks;    // decode block ids to fill, in token order
  uint32_t lease_ms = 0;          // how long decode keeps the blocks reserved
};

enum class MessageType : uint8_t { kHello = 1, kLayerDone = 2, kKvDone = 3, kAbort = 4, kLayerPosted = 5 };
std::string_view MessageTypeName(MessageType type);

// One control message. Which fields are encoded depends on `type`:
//   kHello     (sender -> receiver) model_id, layout: the sender's side of the handshake
//   kLayerDone (sender -> receiver) layer, bytes: every write of that layer is visible
//   kKvDone    (sender -> receiver) num_layers: all layers landed, session over
//   kAbort     (either way) status: the session ended with this error
//   kLayerPosted (sender -> receiver, two-sided transports only) layer, bytes,
//              seq, connection: the layer's write batch is the seq-th (from 0)
//              posted on the connection whose ConnectionToken is `connection`;
//              the receiver posts the matching receive batch in seq order
struct ControlMessage {
  MessageType type = MessageType::kAbort;
  RequestId request_id = 0;
  Epoch epoch = 0;
  std::string model_id;       // kHello
  kv_cache::KvLayout layout;  // kHello
  uint32_t layer = 0;         // kLayerDone, kLayerPosted
  uint64_t bytes = 0;         // kLayerDone, kLayerPosted
  uint32_t num_layers = 0;    // kKvDone
  uint64_t seq = 0;           // kLayerPosted
  std::string connection;     // kLayerPosted (<= kMaxAddressBytes)
  Status status;              // kAbort (never OK)
};

// A message of `type` about (request_id, epoch); the caller fills the type's fields.
inline ControlMessage MakeMessage(MessageType type, RequestId request_id, Epoch epoch) {
  ControlMessage m;
  m.type = type;
  m.request_id = request_id;
  m.epoch = epoch;
  return m;
}

// Delivers an encoded ControlMessage about `request id` to that request's peer
// node (the node wires it to its RPC stream; delivery in order per request).
using ControlSink = std::function<void(RequestId, std::string)>;

std::string EncodeKvTarget(const KvTarget& target);
// InvalidArgument on malformed, oversized or out-of-range input; FailedPrecondition
// on a protocol or layout version this build does not speak.
StatusOr<KvTarget> DecodeKvTarget(std::string_view bytes);

std::string EncodeControlMessage(const ControlMessage& message);
StatusOr<ControlMessage> DecodeControlMessage(std::string_view bytes);

// Handshake check: same model id and KvLayout::Compatible. FailedPrecondition
// naming both sides otherwise.
Status CheckCompatible(std::string_view local_model, const kv_cache::KvLayout& local, std::string_view peer_model,
                       const kv_cache::KvLayout& peer);
// True for a CheckCompatible refusal, also as it comes back to the peer in an Abort.
bool IsHandshakeRefusal(const Status& status);
// Logs a handshake refusal of request `request_id` on side `side` ("kv sender",
// "kv receiver"): the refusal this side made, or (by_peer) the one it got in an
// Abort. At most once per side, reason and interval of `limiter`.
void LogHandshakeRefusal(LogLimiter& limiter, std::string_view side, RequestId request_id, const Status& status,
                         bool by_peer);

}  // namespace tandem::kv_transfer
