// MappedFile: a whole file mapped read-only into memory (RAII: unmapped on
// destruction). Thread rule: immutable after Open; safe to read from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/base/status.h"

namespace tandem::model {

class MappedFile {
 public:
  // Maps `path` read-only. NotFound if it does not exist; an empty file maps
  // to size() == 0 and data() == nullptr.
  static StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Asks the kernel to read [begin, begin + num_bytes) ahead into the page cache
  // (madvise WILLNEED, returning at once). A hint: failures are ignored.
  // REQUIRES: the range lies inside the map.
  void WillNeed(const std::byte* begin, size_t num_bytes) const;

 private:
  MappedFile(std::string path, const std::byte* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem::model
