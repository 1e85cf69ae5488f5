#include "kv_transfer/transport.h"

#include <fmt/format.h>

namespace tandem::kv_transfer {

Status CheckRange(uint64_t offset, uint64_t length, uint64_t region_length, const char* side) {
  if (length == 0) return InvalidArgumentError(fmt::format("empty {} range", side));
  if (offset > region_length || length > region_length - offset) {
    return InvalidArgumentError(
        fmt::format("{} range [{}, +{}) out of region bounds ({} bytes)", side, offset, length, region_length));
  }
  return Status::Ok();
}

Status CheckWriteOpBounds(const WriteOp& op, uint64_t local_length, uint64_t remote_length) {
  TANDEM_RETURN_IF_ERROR(CheckRange(op.local_offset, op.length, local_length, "local"));
  return CheckRange(op.remote_offset, op.length, remote_length, "remote");
}

StatusOr<std::string> Transport::ConnectionToken(PeerId) const {
  return FailedPreconditionError(Capabilities().backend + " transport is one-sided: no connection tokens");
}

StatusOr<PeerId> Transport::Accept(std::string_view) {
  return FailedPreconditionError(Capabilities().backend + " transport is one-sided: nothing to accept");
}

}  // namespace tandem::kv_transfer
