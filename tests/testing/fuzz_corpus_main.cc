// Runs every file under the directories (or files) given on the command line
// through LLVMFuzzerTestOneInput, so a fuzz target's seed corpus runs as an
// ordinary test with any compiler. A crash or abort fails the test.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path root(argv[i]);
    if (std::filesystem::is_regular_file(root)) {
      runs += RunFile(root);
      continue;
    }
    if (!std::filesystem::is_directory(root)) {
      std::fprintf(stderr, "corpus path not found: %s\n", argv[i]);
      return 1;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (entry.is_regular_file()) runs += RunFile(entry.path());
    }
  }
  LLVMFuzzerTestOneInput(nullptr, 0);  // the empty input is always a case
  std::printf("ran %d corpus inputs\n", runs);
  return runs > 0 ? 0 : 1;
}
