# System dependencies (Debian 12 / Ubuntu 24.04 packages; tools/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
find_package(yaml-cpp REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(GTest REQUIRED)
find_package(Boost 1.74 REQUIRED)  # headers: Asio, Beast

# The tokenizer needs PCRE2 and utf8proc. Where they are missing (the GPU machine
# image), the tokenizer and what depends on it (router, tandem-generate) are skipped
# so the model runtime and CUDA backend still build. CI and the README setup install them.
pkg_check_modules(PCRE2 QUIET libpcre2-8)
find_library(UTF8PROC_LIBRARY NAMES utf8proc)
if(PCRE2_FOUND AND UTF8PROC_LIBRARY)
  set(TANDEM_HAVE_TOKENIZER ON)
else()
  set(TANDEM_HAVE_TOKENIZER OFF)
  message(WARNING "pcre2 or utf8proc not found: skipping the tokenizer, router and tools that need them")
endif()
# Folders (relative to the source root) skipped in this configuration.
set(TANDEM_SKIPPED_DIRS "")
if(NOT TANDEM_HAVE_TOKENIZER)
  list(APPEND TANDEM_SKIPPED_DIRS common/tokenizer router tools/generate tests/common/tokenizer tests/router tests/e2e
       bench/tokenizer)
endif()
