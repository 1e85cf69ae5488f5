#include "kv_transfer/messages.h"

#include <fmt/format.h>

#include <utility>

#include "common/base/logging.h"
#include "kv_transfer/wire.h"

namespace tandem::kv_transfer {
namespace {

constexpr uint32_t kTargetMagic = 0x544b5654;   // "TVKT"
constexpr uint32_t kMessageMagic = 0x4d4b5654;  // "TVKM"
constexpr uint8_t kKindTarget = 1;

// Caps that keep every size computation of a parsed layout far from overflow.
constexpr int kMaxLayers = 1024, kMaxHeads = 1024, kMaxHeadDim = 4096, kMaxBlockSize = 4096;
constexpr int kMaxPoolBlocks = 1 << 24;
constexpr std::string_view kHandshakeRefused = "KV handshake refused: ";

void WriteLayout(ByteWriter& w, const kv_cache::KvLayout& l) {
  w.U32(kv_cache::kKvLayoutVersion);
  w.I32(l.num_layers);
  w.I32(l.num_kv_heads);
  w.I32(l.head_dim);
  w.I32(l.block_size);
  w.I32(l.num_blocks);
  w.U8(static_cast<uint8_t>(l.dtype));
}

Status ReadLayout(ByteReader& r, kv_cache::KvLayout* l) {
  uint32_t version = 0;
  TANDEM_RETURN_IF_ERROR(r.U32(&version, "layout version"));
  if (version != kv_cache::kKvLayoutVersion) {
    return FailedPreconditionError(
        fmt::format("KV layout version mismatch: peer {}, local {}", version, kv_cache::kKvLayoutVersion));
  }
  TANDEM_RETURN_IF_ERROR(r.I32(&l->num_layers, "num_layers"));
  TANDEM_RETURN_IF_ERROR(r.I32(&l->num_kv_heads, "num_kv_heads"));
  TANDEM_RETURN_IF_ERROR(r.I32(&l->head_dim, "head_dim"));
  TANDEM_RETURN_IF_ERROR(r.I32(&l->block_size, "block_size"));
  TANDEM_RETURN_IF_ERROR(r.I32(&l->num_blocks, "num_blocks"));
  uint8_t dtype = 0;
  TANDEM_RETURN_IF_ERROR(r.U8(&dtype, "dtype"));
  if (dtype > static_cast<uint8_t>(DType::kU8)) return InvalidArgumentError("unknown dtype");
  l->dtype = static_cast<DType>(dtype);
  if (l->num_layers > kMaxLayers || l->num_kv_heads > kMaxHeads || l->head_dim > kMaxHeadDim ||
      l->block_size > kMaxBlockSize || l->num_blocks > kMaxPoolBlocks) {
    return InvalidArgumentError("KV layout out of range");
  }
  return l->Validate();
}

// Status codes on the wire: fixed numbers, independent of the StatusCode enum order.
constexpr std::pair<StatusCode, uint8_t> kWireCodes[] = {
    {StatusCode::kInvalidArgument, 1},   {StatusCode::kNotFound, 2},           {StatusCode::kAlreadyExists, 3},
    {StatusCode::kResourceExhausted, 4}, {StatusCode::kFailedPrecondition, 5}, {StatusCode::kUnavailable, 6},
    {StatusCode::kDeadlineExceeded, 7},  {StatusCode::kCancelled, 8},          {StatusCode::kPermissionDenied, 9},
    {StatusCode::kUnimplemented, 10},    {StatusCode::kInternal, 11},
};

uint8_t WireCode(StatusCode code) {
  for (auto [c, w] : kWireCodes) {
    if (c == code) return w;
  }
  return 11;  // internal
}

bool CodeFromWire(uint8_t wire, StatusCode* code) {
  for (auto [c, w] : kWireCodes) {
    if (w == wire) {
      *code = c;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "Hello";
    case MessageType::kLayerDone: return "LayerDone";
    case MessageType::kKvDone: return "KvDone";
    case MessageType::kAbort: return "Abort";
    case MessageType::kLayerPosted: return "LayerPosted";
  }
  return "Unknown";
}

std::string EncodeKvTarget(const KvTarget& t) {
  ByteWriter w;
  WriteHeader(w, {kTargetMagic, kProtocolVersion, kKindTarget});
  w.U64(t.request_id);
  w.U32(t.epoch);
  w.Bytes(t.model_id);
  WriteLayout(w, t.layout);
  w.Bytes(t.worker_address);
  w.Bytes(t.region_descriptor);
  w.U64(t.region_offset);
  w.U32(static_cast<uint32_t>(t.blocks.size()));
  for (BlockId b : t.blocks) w.I32(b);
  w.U32(t.lease_ms);
  return w.Take();
}

StatusOr<KvTarget> DecodeKvTarget(std::string_view bytes) {
  if (bytes.size() > kMaxMessageBytes) return InvalidArgumentError("KV target too large");
  ByteReader r(bytes);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kTargetMagic, kProtocolVersion, &h));
  if (h.kind != kKindTarget) return InvalidArgumentError("not a KV target");
  KvTarget t;
  TANDEM_RETURN_IF_ERROR(r.U64(&t.request_id, "request_id"));
  TANDEM_RETURN_IF_ERROR(r.U32(&t.epoch, "epoch"));
  TANDEM_RETURN_IF_ERROR(r.Bytes(&t.model_id, kMaxModelIdBytes, "model_id"));
  TANDEM_RETURN_IF_ERROR(ReadLayout(r, &t.layout));
  TANDEM_RETURN_IF_ERROR(r.Bytes(&t.worker_address, kMaxAddressBytes, "worker_address"));
  TANDEM_RETURN_IF_ERROR(r.Bytes(&t.region_descriptor, kMaxAddressBytes, "region_descriptor"));
  TANDEM_RETURN_IF_ERROR(r.U64(&t.region_offset, "region_offset"));
  if (t.region_offset > UINT64_MAX - t.layout.TotalBytes()) {
    return InvalidArgumentError("region_offset overflows");
  }
  uint32_t n = 0;
  TANDEM_RETURN_IF_ERROR(r.U32(&n, "block count"));
  if (n == 0 || n > kMaxBlocksPerSession || n > r.remaining() / 4) {
    return InvalidArgumentError(fmt::format("bad block count {}", n));
  }
  t.blocks.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    TANDEM_RETURN_IF_ERROR(r.I32(&t.blocks[i], "block id"));
    if (t.blocks[i] < 0 || t.blocks[i] >= t.layout.num_blocks) {
      return InvalidArgumentError(fmt::format("block id {} outside the pool of {}", t.blocks[i], t.layout.num_blocks));
    }
  }
  TANDEM_RETURN_IF_ERROR(r.U32(&t.lease_ms, "lease_ms"));
  if (t.lease_ms == 0 || t.lease_ms > kMaxLeaseMs) return InvalidArgumentError("lease_ms out of range");
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  return t;
}

std::string EncodeControlMessage(const ControlMessage& m) {
  ByteWriter w;
  WriteHeader(w, {kMessageMagic, kProtocolVersion, static_cast<uint8_t>(m.type)});
  w.U64(m.request_id);
  w.U32(m.epoch);
  switch (m.type) {
    case MessageType::kHello:
      w.Bytes(m.model_id);
      WriteLayout(w, m.layout);
      break;
    case MessageType::kLayerDone:
      w.U32(m.layer);
      w.U64(m.bytes);
      break;
    case MessageType::kKvDone: w.U32(m.num_layers); break;
    case MessageType::kAbort:
      TANDEM_CHECK(!m.status.ok()) << "Abort needs an error status";
      w.U8(WireCode(m.status.code()));
      w.Bytes(std::string_view(m.status.message()).substr(0, kMaxReasonBytes));
      break;
    case MessageType::kLayerPosted:
      w.U32(m.layer);
      w.U64(m.bytes);
      w.U64(m.seq);
      w.Bytes(m.connection);
      break;
  }
  return w.Take();
}

StatusOr<ControlMessage> DecodeControlMessage(std::string_view bytes) {
  if (bytes.size() > kMaxMessageBytes) return InvalidArgumentError("control message too large");
  ByteReader r(bytes);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kMessageMagic, kProtocolVersion, &h));
  if (h.kind < 1 || h.kind > 5) return InvalidArgumentError("unknown control message type");
  ControlMessage m;
  m.type = static_cast<MessageType>(h.kind);
  TANDEM_RETURN_IF_ERROR(r.U64(&m.request_id, "request_id"));
  TANDEM_RETURN_IF_ERROR(r.U32(&m.epoch, "epoch"));
  switch (m.type) {
    case MessageType::kHello:
      TANDEM_RETURN_IF_ERROR(r.Bytes(&m.model_id, kMaxModelIdBytes, "model_id"));
      TANDEM_RETURN_IF_ERROR(ReadLayout(r, &m.layout));
      break;
    case MessageType::kLayerDone:
      TANDEM_RETURN_IF_ERROR(r.U32(&m.layer, "layer"));
      TANDEM_RETURN_IF_ERROR(r.U64(&m.bytes, "bytes"));
      break;
    case MessageType::kKvDone: TANDEM_RETURN_IF_ERROR(r.U32(&m.num_layers, "num_layers")); break;
    case MessageType::kAbort: {
      uint8_t code = 0;
      std::string reason;
      TANDEM_RETURN_IF_ERROR(r.U8(&code, "status code"));
      StatusCode status_code;
      if (!CodeFromWire(code, &status_code)) return InvalidArgumentError("bad status code in Abort");
      TANDEM_RETURN_IF_ERROR(r.Bytes(&reason, kMaxReasonBytes, "reason"));
      m.status = Status(status_code, std::move(reason));
      break;
    }
    case MessageType::kLayerPosted:
      TANDEM_RETURN_IF_ERROR(r.U32(&m.layer, "layer"));
      TANDEM_RETURN_IF_ERROR(r.U64(&m.bytes, "bytes"));
      TANDEM_RETURN_IF_ERROR(r.U64(&m.seq, "seq"));
      TANDEM_RETURN_IF_ERROR(r.Bytes(&m.connection, kMaxAddressBytes, "connection"));
      if (m.connection.empty()) return InvalidArgumentError("LayerPosted without a connection");
      break;
  }
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  return m;
}

Status CheckCompatible(std::string_view local_model, const kv_cache::KvLayout& local, std::string_view peer_model,
                       const kv_cache::KvLayout& peer) {
  if (local_model != peer_model) {
    return FailedPreconditionError(
        fmt::format("{}model id mismatch (local '{}', peer '{}')", kHandshakeRefused, local_model, peer_model));
  }
  if (!local.Compatible(peer)) {
    return FailedPreconditionError(fmt::format("{}layout mismatch (local {}, peer {})", kHandshakeRefused,
                                               local.DebugString(), peer.DebugString()));
  }
  return Status::Ok();
}

bool IsHandshakeRefusal(const Status& status) {
  return status.code() == StatusCode::kFailedPrecondition && status.message().starts_with(kHandshakeRefused);
}

void LogHandshakeRefusal(LogLimiter& limiter, std::string_view side, RequestId request_id, const Status& status,
                         bool by_peer) {
  int64_t suppressed = 0;
  if (!limiter.Allow(status.ToString(), &suppressed)) return;
  TANDEM_LOG_WARN("{}: {} request {}: {}{}", side,
                  by_peer ? "the peer refused the KV handshake of" : "refused the KV handshake of", request_id,
                  status.ToString(), SuppressedNote(suppressed));
}

}  // namespace tandem::kv_transfer
