// The source tree's git commit this binary was built from, stamped at build time
// (cmake/TandemBuildCommit.cmake); the project version is BuildVersion()
// (version.h). Profiles carry both so a reader can tell which code produced a
// number. A library of its own (tandem_build_info): only the binaries that
// report it are rebuilt when the commit changes.
// Thread rule: a free function over a constant.
#pragma once

#include <string_view>

namespace tandem {

// 40 hex digits, with "-dirty" appended when tracked files differed from the
// commit; "unknown" when built outside git.
std::string_view BuildCommit();

}  // namespace tandem
