// ResolveWriteOp: the per-op check of a backend's PostWrites (region lookup,
// owner peer, bounds), written once for every backend whose tables are maps
// from region ids. Thread rule: a pure function over the caller's tables; the
// caller holds whatever guards them.
#pragma once

#include "common/base/status.h"
#include "kv_transfer/transport.h"

namespace tandem::kv_transfer {

// The regions of one write, as found by ResolveWriteOp.
template <typename Local, typename Remote>
struct WriteOpRegions {
  const Local* local;
  const Remote* remote;
};

// The check of every op in PostWrites, before anything is posted: its local
// region is in `locals`, its remote region is in `remotes` and was loaded from
// `peer`, and both ranges lie inside them (CheckWriteOpBounds). The maps are a
// backend's tables (region id -> value with `length`; remote values also carry
// `peer`). InvalidArgument otherwise.
template <typename LocalMap, typename RemoteMap>
StatusOr<WriteOpRegions<typename LocalMap::mapped_type, typename RemoteMap::mapped_type>> ResolveWriteOp(
    const WriteOp& op, PeerId peer, const LocalMap& locals, const RemoteMap& remotes) {
  auto local = locals.find(op.local_region);
  if (local == locals.end()) return InvalidArgumentError("unknown local region in write");
  auto remote = remotes.find(op.remote_region);
  if (remote == remotes.end() || remote->second.peer != peer) {
    return InvalidArgumentError("unknown remote region in write");
  }
  TANDEM_RETURN_IF_ERROR(CheckWriteOpBounds(op, local->second.length, remote->second.length));
  return WriteOpRegions<typename LocalMap::mapped_type, typename RemoteMap::mapped_type>{&local->second,
                                                                                         &remote->second};
}

}  // namespace tandem::kv_transfer
