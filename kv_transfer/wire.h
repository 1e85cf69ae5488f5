// Bounded little-endian byte encoding for everything kv_transfer puts on the
// wire: remote memory descriptors, worker addresses and control messages.
// The control plane carries these bytes opaquely, so every reader here treats
// its input as hostile: each read is bounds-checked and returns a Status.
// Thread rule: plain value types; one instance per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/status.h"

namespace tandem::kv_transfer {

// Appends fixed-width little-endian integers and length-prefixed byte strings.
class ByteWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Fixed(v, 2); }
  void U32(uint32_t v) { Fixed(v, 4); }
  void U64(uint64_t v) { Fixed(v, 8); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  // u32 length, then the bytes.
  void Bytes(std::string_view bytes);

  const std::string& data() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void Fixed(uint64_t v, int width);
  std::string out_;
};

// Reads what ByteWriter wrote. Every method fails with InvalidArgument (naming
// `what`) instead of reading past the end; the reader is then poisoned.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  Status U8(uint8_t* v, const char* what);
  Status U16(uint16_t* v, const char* what);
  Status U32(uint32_t* v, const char* what);
  Status U64(uint64_t* v, const char* what);
  Status I32(int32_t* v, const char* what);
  // Reads a u32 length (must be <= max_bytes) and that many bytes.
  Status Bytes(std::string* v, size_t max_bytes, const char* what);
  // OK only when every byte was consumed (trailing garbage is refused).
  Status ExpectEnd() const;
  size_t remaining() const { return in_.size() - pos_; }

 private:
  Status Fixed(uint64_t* v, int width, const char* what);
  std::string_view in_;
  size_t pos_ = 0;
};

// Envelope shared by every encoded object: magic, version, kind.
struct WireHeader {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t kind = 0;
};
void WriteHeader(ByteWriter& w, const WireHeader& h);
// Reads the header and checks magic and version (== expected_version).
Status ReadHeader(ByteReader& r, uint32_t expected_magic, uint16_t expected_version, WireHeader* h);

}  // namespace tandem::kv_transfer
