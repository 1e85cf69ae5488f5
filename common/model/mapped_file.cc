#include "common/model/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace tandem::model {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(path + ": file not found");
    return UnavailableError(path + ": open failed: " + std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* addr = nullptr;
  if (size > 0) {
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return UnavailableError(path + ": mmap failed: " + std::strerror(err));
    }
  }
  ::close(fd);  // the mapping keeps the file alive
  return std::unique_ptr<MappedFile>(new MappedFile(path, static_cast<const std::byte*>(addr), size));
}

void MappedFile::WillNeed(const std::byte* begin, size_t num_bytes) const {
  if (num_bytes == 0) return;
  // madvise takes a page-aligned start; the page holding `begin` is inside the map.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(begin) / page * page;
  ::madvise(reinterpret_cast<void*>(start), reinterpret_cast<uintptr_t>(begin) + num_bytes - start, MADV_WILLNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace tandem::model
