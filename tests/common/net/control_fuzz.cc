// libFuzzer target over the control-plane input path: the frame decoder fed
// in arbitrary splits, then message parsing of every decoded frame, exactly
// as a connection does with bytes from a peer.
#include <cstddef>
#include <cstdint>

#include "common/net/frame.h"
#include "common/proto/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the read size, so frames straddle reads in every way.
  size_t chunk = static_cast<size_t>(data[0]) + 1;
  constexpr uint32_t kCap = 1 << 16;
  tandem::net::FrameDecoder decoder(kCap);
  for (size_t at = 1; at < size; at += chunk) {
    size_t n = size - at < chunk ? size - at : chunk;
    decoder.Append(data + at, n);
    while (true) {
      auto next = decoder.Next();
      if (!next.ok()) return 0;
      if (!next->has_value()) break;
      const auto& frame = **next;
      auto message =
          tandem::proto::ParseMessage(static_cast<tandem::proto::MessageType>(frame.header.type), frame.payload, kCap);
      if (message.ok()) (*message)->ByteSizeLong();
    }
  }
  // The raw bytes as every message class too (payloads a peer could send).
  for (uint32_t type = 1; type < 32; ++type) {
    if (!tandem::proto::IsKnownMessageType(type)) continue;
    auto message = tandem::proto::ParseMessage(static_cast<tandem::proto::MessageType>(type),
                                               std::string_view(reinterpret_cast<const char*>(data), size), kCap);
    if (message.ok()) (*message)->SerializeAsString();
  }
  return 0;
}
