// MakeBackend: the model runtime backend named by a config ("cpu" or "cuda").
// The one place that knows every backend; "cuda" exists only in builds with
// TANDEM_CUDA=ON and is an Unimplemented error elsewhere.
#pragma once

#include <memory>
#include <string>

#include "common/base/status.h"
#include "common/runtime/backend.h"

namespace tandem::engine {

// `device`: the CUDA device ordinal (ignored for "cpu").
StatusOr<std::unique_ptr<runtime::Backend>> MakeBackend(const std::string& name, int device);

}  // namespace tandem::engine
