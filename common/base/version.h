// The version of the project this binary was built from (CMakeLists.txt's
// project(); the build records no git commit). The router answers it on
// GET /version and nodes send it when they register, for operators.
// Thread rule: a constant; safe from any thread.
#pragma once

namespace tandem {

// "0.1.0"; "unknown" when built outside CMake.
const char* BuildVersion();

}  // namespace tandem
