// MakeTransport: the KV transport a node's config names. "ucx" builds a
// UcxTransport over the given UCX transport list (tcp, shm, ...); in-process
// "local" transports need a shared fabric, which only tests construct.
// Header-only so that it sees TANDEM_HAVE_UCX exactly when the caller links
// the optional tandem_kv_transfer_ucx library.
#pragma once

#include <memory>
#include <string>

#include "common/base/status.h"
#include "kv_transfer/transport.h"
#ifdef TANDEM_HAVE_UCX
#include "kv_transfer/ucx/ucx_transport.h"
#endif

namespace tandem::kv_transfer {

inline StatusOr<std::unique_ptr<Transport>> MakeTransport(const std::string& name,
                                                         const std::string& ucx_transports) {
  if (name == "ucx") {
#ifdef TANDEM_HAVE_UCX
    UcxConfig ucx;
    ucx.transports = ucx_transports;
    // UCX 1.13's shared-memory transports cannot detect peer failure.
    ucx.peer_error_handling =
        ucx_transports.find("shm") == std::string::npos && ucx_transports.find("sm") == std::string::npos;
    TANDEM_ASSIGN_OR_RETURN(auto t, UcxTransport::Create(ucx));
    return std::unique_ptr<Transport>(std::move(t));
#else
    return UnimplementedError("this build has no UCX transport");
#endif
  }
  return InvalidArgumentError("transport '" + name + "' needs an in-process fabric (tests only)");
}

}  // namespace tandem::kv_transfer
