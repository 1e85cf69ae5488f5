#include "common/model/json_limits.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/base/json_depth.h"

namespace tandem::model {

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFoundError(path + ": file not found");
    return UnavailableError(path + ": stat failed: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(path + ": not a regular file");
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return InvalidArgumentError(path + ": file is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                std::to_string(max_bytes));
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return UnavailableError(path + ": open failed: " + std::strerror(errno));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = std::fread(text.data(), 1, text.size(), file.get());
  if (got != text.size()) return UnavailableError(path + ": short read");
  return text;
}

StatusOr<nlohmann::json> ParseJsonText(std::string_view text, size_t max_bytes, int max_depth, std::string_view what) {
  if (text.size() > max_bytes) {
    return InvalidArgumentError(std::string(what) + ": " + std::to_string(text.size()) +
                                " bytes of JSON, over the limit of " + std::to_string(max_bytes));
  }
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    return InvalidArgumentError(std::string(what) + ": JSON nests deeper than " + std::to_string(max_depth) +
                                " levels");
  }
  nlohmann::json value = nlohmann::json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                                               /*allow_exceptions=*/false);
  if (value.is_discarded()) return InvalidArgumentError(std::string(what) + ": not valid JSON");
  return value;
}

}  // namespace tandem::model
