// Helpers for the model loader tests: fixture paths, scratch directories and
// hand-built (possibly broken) safetensors files.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "gtest/gtest.h"

namespace tandem::model::testing {

inline std::string SourceDir() {
  const char* dir = std::getenv("TANDEM_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

inline std::string TestDataPath(const std::string& relative) {
  return SourceDir() + "/tests/common/model/testdata/" + relative;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteAll(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// Root of this process's scratch directories (removed by test_util.cc at exit).
inline std::filesystem::path ScratchRoot() {
  return std::filesystem::temp_directory_path() / ("tandem_model_test_" + std::to_string(::getpid()));
}

// A fresh empty directory under the test temp dir, unique per test.
inline std::string ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = ScratchRoot() / (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// The bytes of a safetensors file: 8-byte little-endian length of `header`,
// `header`, then `data_bytes` bytes of `fill`. No validation: tests break files on purpose.
inline std::string RawSafetensors(std::string_view header, size_t data_bytes, char fill = 0) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(header);
  out.append(data_bytes, fill);
  return out;
}

}  // namespace tandem::model::testing
