#include "common/engine/backend_factory.h"

#include "common/runtime/cpu_backend.h"
#ifdef TANDEM_HAVE_CUDA_BACKEND
#include "common/runtime/cuda_backend.h"
#endif

namespace tandem::engine {

StatusOr<std::unique_ptr<runtime::Backend>> MakeBackend(const std::string& name, int device) {
  if (name == "cpu") return std::unique_ptr<runtime::Backend>(std::make_unique<runtime::CpuBackend>());
  if (name == "cuda") {
#ifdef TANDEM_HAVE_CUDA_BACKEND
    runtime::CudaBackendOptions options;
    options.device = device;
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CudaBackend> backend, runtime::CudaBackend::Create(options));
    return std::unique_ptr<runtime::Backend>(std::move(backend));
#else
    return UnimplementedError("this build has no CUDA backend (configure with -DTANDEM_CUDA=ON)");
#endif
  }
  return InvalidArgumentError("unknown backend '" + name + "' (cpu, cuda)");
}

}  // namespace tandem::engine
