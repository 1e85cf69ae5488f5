// What this binary was built from: the project version and the source tree's git
// commit, stamped at build time (cmake/TandemBuildCommit.cmake). Profiles and
// reports carry them so a reader can tell which code produced a number.
// Thread rule: free functions over constants.
#pragma once

#include <string_view>

namespace tandem {

// The project version (CMakeLists.txt's project()), e.g. "0.1.0".
std::string_view BuildVersion();
// The git commit of the source tree the build saw: 40 hex digits, with "-dirty"
// appended when tracked files differed from it; "unknown" when built outside git.
std::string_view BuildCommit();

}  // namespace tandem
