#include "common/net/frame.h"

#include <cstring>

#include "common/proto/messages.h"

namespace tandem::net {
namespace {

void PutBe(uint64_t value, int bytes, uint8_t* out) {
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<uint8_t>(value & 0xff);
    value >>= 8;
  }
}

uint64_t GetBe(const uint8_t* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | in[i];
  return value;
}

}  // namespace

void EncodeFrameHeader(const FrameHeader& header, uint8_t* out) {
  std::memcpy(out, kFrameMagic, 4);
  out[4] = static_cast<uint8_t>(proto::kProtocolVersion);
  out[5] = static_cast<uint8_t>(header.kind);
  PutBe(header.type, 2, out + 6);
  PutBe(header.correlation_id, 8, out + 8);
  PutBe(header.payload_bytes, 4, out + 16);
  PutBe(0, 4, out + 20);
}

StatusOr<FrameHeader> DecodeFrameHeader(const uint8_t* data, uint32_t max_payload_bytes) {
  if (std::memcmp(data, kFrameMagic, 4) != 0) {
    return InvalidArgumentError("bad frame magic (not a Tandem control connection?)");
  }
  if (data[4] != proto::kProtocolVersion) {
    return InvalidArgumentError("unsupported protocol version " + std::to_string(data[4]) + " (this build speaks " +
                                std::to_string(proto::kProtocolVersion) + ")");
  }
  if (data[5] > static_cast<uint8_t>(FrameKind::kOneWay)) {
    return InvalidArgumentError("bad frame kind " + std::to_string(data[5]));
  }
  FrameHeader header;
  header.kind = static_cast<FrameKind>(data[5]);
  header.type = static_cast<uint16_t>(GetBe(data + 6, 2));
  header.correlation_id = GetBe(data + 8, 8);
  header.payload_bytes = static_cast<uint32_t>(GetBe(data + 16, 4));
  if (GetBe(data + 20, 4) != 0) return InvalidArgumentError("non-zero reserved frame field");
  if (!proto::IsKnownMessageType(header.type)) {
    return InvalidArgumentError("unknown message type " + std::to_string(header.type));
  }
  if (header.payload_bytes > max_payload_bytes) {
    return ResourceExhaustedError("frame payload of " + std::to_string(header.payload_bytes) +
                                  " bytes exceeds the limit of " + std::to_string(max_payload_bytes));
  }
  return header;
}

StatusOr<std::string> EncodeFrame(FrameKind kind, uint64_t correlation_id, const google::protobuf::Message& message,
                                  uint32_t max_payload_bytes) {
  proto::MessageType type = proto::TypeOf(message);
  if (type == proto::MESSAGE_TYPE_UNSPECIFIED) {
    return InvalidArgumentError("not a control message: " + message.GetTypeName());
  }
  size_t payload_bytes = message.ByteSizeLong();
  if (payload_bytes > max_payload_bytes) {
    return InvalidArgumentError(proto::MessageTypeName(type) + " of " + std::to_string(payload_bytes) +
                                " bytes exceeds the limit of " + std::to_string(max_payload_bytes));
  }
  std::string out(kFrameHeaderBytes + payload_bytes, '\0');
  FrameHeader header;
  header.kind = kind;
  header.type = static_cast<uint16_t>(type);
  header.correlation_id = correlation_id;
  header.payload_bytes = static_cast<uint32_t>(payload_bytes);
  EncodeFrameHeader(header, reinterpret_cast<uint8_t*>(out.data()));
  if (!message.SerializeToArray(out.data() + kFrameHeaderBytes, static_cast<int>(payload_bytes))) {
    return InternalError("failed to serialize " + proto::MessageTypeName(type));
  }
  return out;
}

void FrameDecoder::Append(const void* data, size_t size) {
  if (!error_.ok() || size == 0) return;
  // Drop consumed bytes before growing, so the buffer holds at most one frame + one read.
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(static_cast<const char*>(data), size);
}

StatusOr<std::optional<Frame>> FrameDecoder::Next() {
  if (!error_.ok()) return error_;
  if (!pending_header_) {
    if (buffered_bytes() < kFrameHeaderBytes) return std::optional<Frame>();
    auto header = DecodeFrameHeader(reinterpret_cast<const uint8_t*>(buffer_.data()) + consumed_, max_payload_bytes_);
    if (!header.ok()) {
      error_ = header.status();
      buffer_.clear();
      consumed_ = 0;
      return error_;
    }
    pending_header_ = *header;
    consumed_ += kFrameHeaderBytes;
  }
  if (buffered_bytes() < pending_header_->payload_bytes) return std::optional<Frame>();
  Frame frame;
  frame.header = *pending_header_;
  frame.payload.assign(buffer_.data() + consumed_, frame.header.payload_bytes);
  consumed_ += frame.header.payload_bytes;
  pending_header_.reset();
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  return std::optional<Frame>(std::move(frame));
}

}  // namespace tandem::net
