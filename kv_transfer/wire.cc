#include "kv_transfer/wire.h"

#include <string>

namespace tandem::kv_transfer {

void ByteWriter::Fixed(uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void ByteWriter::Bytes(std::string_view bytes) {
  TANDEM_CHECK(bytes.size() <= UINT32_MAX) << "byte string too long: " << bytes.size();
  U32(static_cast<uint32_t>(bytes.size()));
  out_.append(bytes.data(), bytes.size());
}

Status ByteReader::Fixed(uint64_t* v, int width, const char* what) {
  if (remaining() < static_cast<size_t>(width)) {
    pos_ = in_.size();
    return InvalidArgumentError(std::string("truncated input reading ") + what);
  }
  uint64_t x = 0;
  for (int i = 0; i < width; ++i) {
    x |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
  }
  pos_ += width;
  *v = x;
  return Status::Ok();
}

Status ByteReader::U8(uint8_t* v, const char* what) {
  uint64_t x = 0;
  TANDEM_RETURN_IF_ERROR(Fixed(&x, 1, what));
  *v = static_cast<uint8_t>(x);
  return Status::Ok();
}

Status ByteReader::U16(uint16_t* v, const char* what) {
  uint64_t x = 0;
  TANDEM_RETURN_IF_ERROR(Fixed(&x, 2, what));
  *v = static_cast<uint16_t>(x);
  return Status::Ok();
}

Status ByteReader::U32(uint32_t* v, const char* what) {
  uint64_t x = 0;
  TANDEM_RETURN_IF_ERROR(Fixed(&x, 4, what));
  *v = static_cast<uint32_t>(x);
  return Status::Ok();
}

Status ByteReader::U64(uint64_t* v, const char* what) { return Fixed(v, 8, what); }

Status ByteReader::I32(int32_t* v, const char* what) {
  uint32_t x = 0;
  TANDEM_RETURN_IF_ERROR(U32(&x, what));
  *v = static_cast<int32_t>(x);
  return Status::Ok();
}

Status ByteReader::Bytes(std::string* v, size_t max_bytes, const char* what) {
  uint32_t len = 0;
  TANDEM_RETURN_IF_ERROR(U32(&len, what));
  if (len > max_bytes) {
    pos_ = in_.size();
    return InvalidArgumentError(std::string(what) + " too long: " + std::to_string(len) + " bytes (limit " +
                                std::to_string(max_bytes) + ")");
  }
  if (remaining() < len) {
    pos_ = in_.size();
    return InvalidArgumentError(std::string("truncated input reading ") + what);
  }
  v->assign(in_.data() + pos_, len);
  pos_ += len;
  return Status::Ok();
}

Status ByteReader::ExpectEnd() const {
  if (remaining() != 0) {
    return InvalidArgumentError(std::to_string(remaining()) + " trailing bytes");
  }
  return Status::Ok();
}

void WriteHeader(ByteWriter& w, const WireHeader& h) {
  w.U32(h.magic);
  w.U16(h.version);
  w.U8(h.kind);
}

Status ReadHeader(ByteReader& r, uint32_t expected_magic, uint16_t expected_version, WireHeader* h) {
  TANDEM_RETURN_IF_ERROR(r.U32(&h->magic, "magic"));
  if (h->magic != expected_magic) return InvalidArgumentError("bad magic (not a kv_transfer object)");
  TANDEM_RETURN_IF_ERROR(r.U16(&h->version, "version"));
  if (h->version != expected_version) {
    return FailedPreconditionError("unsupported wire version " + std::to_string(h->version) + " (this build speaks " +
                                   std::to_string(expected_version) + ")");
  }
  return r.U8(&h->kind, "kind");
}

}  // namespace tandem::kv_transfer
