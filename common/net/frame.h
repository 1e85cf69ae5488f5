// Control-plane framing: every protobuf message travels in one frame.
//
//   offset size  field
//   0      4     magic "TNDM" (0x54 0x4E 0x44 0x4D)
//   4      1     version (proto::kProtocolVersion)
//   5      1     kind (FrameKind)
//   6      2     type (proto::MessageType), big-endian
//   8      8     correlation id, big-endian (request/reply pairing; 0 for one-way)
//   16     4     payload length in bytes, big-endian
//   20     4     reserved, must be zero
//   24     ...   payload: the serialized message
//
// A frame with a wrong magic/version/kind/type, a non-zero reserved word, or a
// payload above the configured cap is garbled: the decoder reports a Status and
// stays failed, and the connection closes. Thread rule: FrameDecoder is
// single-threaded (one per connection, used on its I/O strand); free functions
// are thread-safe.
#pragma once

#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/base/status.h"

namespace tandem::net {

inline constexpr uint8_t kFrameMagic[4] = {'T', 'N', 'D', 'M'};
inline constexpr size_t kFrameHeaderBytes = 24;
// Default payload cap; RpcConfig::max_frame_bytes overrides it.
inline constexpr uint32_t kDefaultMaxPayloadBytes = 64u << 20;

enum class FrameKind : uint8_t {
  kRequest = 0,  // expects exactly one reply with the same correlation id
  kReply = 1,    // answers a request; type ERROR carries a failure
  kOneWay = 2,   // no reply (Tokens, Heartbeat, KvDone, Ping)
};

struct FrameHeader {
  FrameKind kind = FrameKind::kOneWay;
  uint16_t type = 0;            // proto::MessageType
  uint64_t correlation_id = 0;  // chosen by the requester, unique per connection
  uint32_t payload_bytes = 0;
};

struct Frame {
  FrameHeader header;
  std::string payload;  // serialized message, header.payload_bytes long
};

// Writes the 24-byte header for `header` into out[0..24).
void EncodeFrameHeader(const FrameHeader& header, uint8_t* out);

// Validates and decodes a 24-byte header. InvalidArgument on any garbled field;
// ResourceExhausted when payload_bytes exceeds max_payload_bytes.
StatusOr<FrameHeader> DecodeFrameHeader(const uint8_t* data, uint32_t max_payload_bytes);

// Header + serialized `message` as one buffer. InvalidArgument when the message
// is not a control-protocol class or serializes above max_payload_bytes.
StatusOr<std::string> EncodeFrame(FrameKind kind, uint64_t correlation_id, const google::protobuf::Message& message,
                                  uint32_t max_payload_bytes);

// Incremental decoder over a byte stream (bytes arrive in any split).
class FrameDecoder {
 public:
  explicit FrameDecoder(uint32_t max_payload_bytes = kDefaultMaxPayloadBytes) : max_payload_bytes_(max_payload_bytes) {}

  // Appends bytes read from the peer. Call Next() until it returns nullopt
  // before appending more, which bounds the buffer to one frame plus one read.
  void Append(const void* data, size_t size);

  // The next complete frame; nullopt when more bytes are needed; an error when
  // the stream is garbled. After an error every call returns the same error.
  StatusOr<std::optional<Frame>> Next();

  // Changes the payload cap for frames whose header is not decoded yet.
  void set_max_payload_bytes(uint32_t max_payload_bytes) { max_payload_bytes_ = max_payload_bytes; }

  // Bytes received but not yet returned as frames.
  size_t buffered_bytes() const { return buffer_.size() - consumed_; }

 private:
  uint32_t max_payload_bytes_;
  std::string buffer_;
  size_t consumed_ = 0;
  std::optional<FrameHeader> pending_header_;  // decoded header awaiting its payload
  Status error_;
};

}  // namespace tandem::net
