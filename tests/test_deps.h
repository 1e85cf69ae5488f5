// Where the tests' downloaded data lives (the setup_test_data.sh scripts put it there):
// $TANDEM_DEPS_DIR, else $TANDEM_SOURCE_DIR/.deps (ctest sets TANDEM_SOURCE_DIR), else ./.deps.
#pragma once

#include <cstdlib>
#include <string>

namespace tandem {

inline std::string TestDepsDir() {
  if (const char* deps = std::getenv("TANDEM_DEPS_DIR"); deps != nullptr && *deps != '\0') return deps;
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(src != nullptr ? src : ".") + "/.deps";
}

}  // namespace tandem
