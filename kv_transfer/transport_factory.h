// MakeTransport: the KV transport a node's config names. "ucx" builds a
// UcxTransport over the given UCX transport list (tcp, shm, ...); "cuda_ipc"
// and "nccl" build the GPU backends on the given CUDA device; in-process
// "local" transports need a shared fabric, which only tests construct.
// Header-only so that it sees TANDEM_HAVE_UCX / TANDEM_HAVE_CUDA_IPC /
// TANDEM_HAVE_NCCL exactly when the caller links the optional backend library
// (tandem_kv_transfer_ucx, _cuda_ipc, _nccl).
#pragma once

#include <memory>
#include <string>

#include "common/base/status.h"
#include "kv_transfer/transport.h"
#ifdef TANDEM_HAVE_UCX
#include "kv_transfer/ucx/ucx_transport.h"
#endif
#ifdef TANDEM_HAVE_CUDA_IPC
#include "kv_transfer/cuda_ipc/cuda_ipc_transport.h"
#endif
#ifdef TANDEM_HAVE_NCCL
#include "kv_transfer/nccl/nccl_transport.h"
#endif

namespace tandem::kv_transfer {

struct TransportOptions {
  std::string ucx_transports;  // "ucx": UCX transport list (UCX_TLS syntax); empty: UCX's choice
  int cuda_device = 0;         // "cuda_ipc", "nccl": CUDA device ordinal of the node's KV pool
};

inline StatusOr<std::unique_ptr<Transport>> MakeTransport(const std::string& name, const TransportOptions& options) {
  if (name == "ucx") {
#ifdef TANDEM_HAVE_UCX
    UcxConfig ucx;
    ucx.transports = options.ucx_transports;
    // UCX 1.13's shared-memory transports cannot detect peer failure.
    ucx.peer_error_handling = options.ucx_transports.find("shm") == std::string::npos &&
                              options.ucx_transports.find("sm") == std::string::npos;
    TANDEM_ASSIGN_OR_RETURN(auto t, UcxTransport::Create(ucx));
    return std::unique_ptr<Transport>(std::move(t));
#else
    return UnimplementedError("this build has no UCX transport (pkg-config found no ucx)");
#endif
  }
  if (name == "cuda_ipc") {
#ifdef TANDEM_HAVE_CUDA_IPC
    CudaIpcConfig config;
    config.device = options.cuda_device;
    TANDEM_ASSIGN_OR_RETURN(auto t, CudaIpcTransport::Create(config));
    return std::unique_ptr<Transport>(std::move(t));
#else
    return UnimplementedError(
        "this build has no cuda_ipc transport (built without TANDEM_CUDA, or the "
        "binary does not link tandem_kv_transfer_cuda_ipc)");
#endif
  }
  if (name == "nccl") {
#ifdef TANDEM_HAVE_NCCL
    NcclConfig config;
    config.device = options.cuda_device;
    TANDEM_ASSIGN_OR_RETURN(auto t, NcclTransport::Create(config));
    return std::unique_ptr<Transport>(std::move(t));
#else
    return UnimplementedError(
        "this build has no nccl transport (built without TANDEM_CUDA or NCCL, or the "
        "binary does not link tandem_kv_transfer_nccl)");
#endif
  }
  if (name == "local") return InvalidArgumentError("transport 'local' needs an in-process fabric (tests only)");
  return InvalidArgumentError("unknown transport '" + name + "' (ucx, cuda_ipc, nccl)");
}

}  // namespace tandem::kv_transfer
