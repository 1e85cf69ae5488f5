#include "kv_transfer/cuda_ipc/cuda_ipc_wire.h"

#include "kv_transfer/transport.h"
#include "kv_transfer/wire.h"

namespace tandem::kv_transfer {
namespace {

constexpr uint32_t kCudaIpcMagic = 0x43564b54;  // "TKVC"
constexpr uint16_t kCudaIpcVersion = 1;
constexpr uint8_t kKindAddress = 1;
constexpr uint8_t kKindRegion = 2;

Status ReadFixedBytes(ByteReader& r, std::string* out, size_t size, const char* what) {
  TANDEM_RETURN_IF_ERROR(r.Bytes(out, size, what));
  if (out->size() != size) return InvalidArgumentError(std::string(what) + ": wrong size");
  return Status::Ok();
}

}  // namespace

std::string EncodeCudaIpcAddress(const CudaIpcAddress& a) {
  ByteWriter w;
  WriteHeader(w, {kCudaIpcMagic, kCudaIpcVersion, kKindAddress});
  WriteProcessIdentity(w, a.process);
  w.U64(a.nonce);
  w.Bytes(a.device_uuid);
  return w.Take();
}

StatusOr<CudaIpcAddress> DecodeCudaIpcAddress(std::string_view bytes) {
  ByteReader r(bytes);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kCudaIpcMagic, kCudaIpcVersion, &h).WithContext("cuda_ipc address"));
  if (h.kind != kKindAddress) return InvalidArgumentError("not a cuda_ipc worker address");
  CudaIpcAddress a;
  TANDEM_RETURN_IF_ERROR(ReadProcessIdentity(r, &a.process));
  TANDEM_RETURN_IF_ERROR(r.U64(&a.nonce, "nonce"));
  TANDEM_RETURN_IF_ERROR(ReadFixedBytes(r, &a.device_uuid, kDeviceUuidBytes, "device uuid"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (a.nonce == 0) return InvalidArgumentError("cuda_ipc address without a nonce");
  return a;
}

std::string EncodeCudaIpcRegion(const CudaIpcRegion& region) {
  ByteWriter w;
  WriteHeader(w, {kCudaIpcMagic, kCudaIpcVersion, kKindRegion});
  w.U64(region.owner_nonce);
  w.Bytes(region.ipc_handle);
  w.U64(region.allocation_bytes);
  w.U64(region.offset);
  w.U64(region.length);
  return w.Take();
}

StatusOr<CudaIpcRegion> DecodeCudaIpcRegion(std::string_view bytes) {
  ByteReader r(bytes);
  WireHeader h;
  TANDEM_RETURN_IF_ERROR(ReadHeader(r, kCudaIpcMagic, kCudaIpcVersion, &h).WithContext("cuda_ipc region"));
  if (h.kind != kKindRegion) return InvalidArgumentError("not a cuda_ipc region descriptor");
  CudaIpcRegion region;
  TANDEM_RETURN_IF_ERROR(r.U64(&region.owner_nonce, "owner"));
  TANDEM_RETURN_IF_ERROR(ReadFixedBytes(r, &region.ipc_handle, kCudaIpcHandleBytes, "ipc handle"));
  TANDEM_RETURN_IF_ERROR(r.U64(&region.allocation_bytes, "allocation bytes"));
  TANDEM_RETURN_IF_ERROR(r.U64(&region.offset, "offset"));
  TANDEM_RETURN_IF_ERROR(r.U64(&region.length, "length"));
  TANDEM_RETURN_IF_ERROR(r.ExpectEnd());
  if (region.owner_nonce == 0) return InvalidArgumentError("cuda_ipc region without an owner");
  TANDEM_RETURN_IF_ERROR(CheckRange(region.offset, region.length, region.allocation_bytes, "cuda_ipc region")
                             .WithContext("region descriptor"));
  return region;
}

}  // namespace tandem::kv_transfer
