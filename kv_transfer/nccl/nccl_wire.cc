#include "kv_transfer/nccl/nccl_wire.h"

#include "kv_transfer/wire.h"

namespace tandem::kv_transfer {
namespace {

constexpr uint32_t kNcclMagic = 0x4e564b54;  // "TKVN"
constexpr uint16_t kNcclVersion = 1;
constexpr uint8_t kKindAddress = 1;
constexpr uint8_t kKindRegion = 2;
constexpr uint8_t kKindToken = 3;

Status ReadFixed(ByteReader& r, std::string* out, size_t size, const char* what) {
  TANDEM_RETURN_IF_ERROR(r.Bytes(out, size, what));
  if (out->size() != size) return InvalidArgumentError(std::string(what) + ": wrong size");
  return Status::Ok();
}

Status ReadKind(ByteReader& r, uint8_t kind, const char* what) {
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kNcclMagic, kNcclVersion, &h).WithContext(what));
  if (h.kind != kind) return InvalidArgumentError(std::string("not an nccl ") + what);
  return Status::Ok();
}

}  // namespace

std::string EncodeNcclAddress(const NcclAddress& a) {
  ByteWriter w;
  WriteHeader(w, {kNcclMagic, kNcclVersion, kKindAddress});
  WriteProcessIdentity(w, a.process);
  w.U64(a.nonce);
  w.Bytes(a.device_uuid);
  return w.Take();
}

StatusOr<NcclAddress> DecodeNcclAddress(std::string_view bytes) {
  ByteReader r(bytes);
  TANDEM_RETURN_IF_ERROR(ReadKind(r, kKindAddress, "worker address"));
  NcclAddress a;
  TANDEM_RETURN_IF_ERROR(ReadProcessIdentity(r, &a.process));
  TANDEM_RETURN_IF_ERROR(r.U64(&a.nonce, "nonce"));
  TANDEM_RETURN_IF_ERROR(ReadFixed(r, &a.device_uuid, kNcclDeviceUuidBytes, "device uuid"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (a.nonce == 0) return InvalidArgumentError("nccl address without a nonce");
  return a;
}

std::string EncodeNcclToken(const NcclToken& t) {
  ByteWriter w;
  WriteHeader(w, {kNcclMagic, kNcclVersion, kKindToken});
  w.U64(t.writer_nonce);
  w.U64(t.target_nonce);
  WriteProcessIdentity(w, t.writer);
  w.Bytes(t.writer_device_uuid);
  w.Bytes(t.unique_id);
  w.U64(t.chunk_bytes);
  return w.Take();
}

StatusOr<NcclToken> DecodeNcclToken(std::string_view bytes) {
  ByteReader r(bytes);
  TANDEM_RETURN_IF_ERROR(ReadKind(r, kKindToken, "connection token"));
  NcclToken t;
  TANDEM_RETURN_IF_ERROR(r.U64(&t.writer_nonce, "writer nonce"));
  TANDEM_RETURN_IF_ERROR(r.U64(&t.target_nonce, "target nonce"));
  TANDEM_RETURN_IF_ERROR(ReadProcessIdentity(r, &t.writer));
  TANDEM_RETURN_IF_ERROR(ReadFixed(r, &t.writer_device_uuid, kNcclDeviceUuidBytes, "device uuid"));
  TANDEM_RETURN_IF_ERROR(ReadFixed(r, &t.unique_id, kNcclUniqueIdBytes, "unique id"));
  TANDEM_RETURN_IF_ERROR(r.U64(&t.chunk_bytes, "chunk bytes"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (t.writer_nonce == 0 || t.target_nonce == 0 || t.chunk_bytes == 0) {
    return InvalidArgumentError("nccl token without nonces or chunk size");
  }
  return t;
}

std::string EncodeNcclRegion(const NcclRegion& region) {
  ByteWriter w;
  WriteHeader(w, {kNcclMagic, kNcclVersion, kKindRegion});
  w.U64(region.owner_nonce);
  w.U64(region.length);
  return w.Take();
}

StatusOr<NcclRegion> DecodeNcclRegion(std::string_view bytes) {
  ByteReader r(bytes);
  TANDEM_RETURN_IF_ERROR(ReadKind(r, kKindRegion, "region descriptor"));
  NcclRegion region;
  TANDEM_RETURN_IF_ERROR(r.U64(&region.owner_nonce, "owner"));
  TANDEM_RETURN_IF_ERROR(r.U64(&region.length, "length"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (region.owner_nonce == 0 || region.length == 0) return InvalidArgumentError("bad nccl region descriptor");
  return region;
}

}  // namespace tandem::kv_transfer
