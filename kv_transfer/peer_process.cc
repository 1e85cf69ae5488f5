#include "kv_transfer/peer_process.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tandem::kv_transfer {
namespace {

constexpr size_t kMaxBootIdBytes = 64;

}  // namespace

StatusOr<ProcessIdentity> SelfIdentity() {
  ProcessIdentity id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (!std::getline(in, id.boot_id) || id.boot_id.empty() || id.boot_id.size() > kMaxBootIdBytes) {
    return InternalError("cannot read /proc/sys/kernel/random/boot_id");
  }
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) == 0) id.pid_namespace = st.st_ino;
  id.pid = static_cast<uint32_t>(::getpid());
  return id;
}

void WriteProcessIdentity(ByteWriter& w, const ProcessIdentity& id) {
  w.Bytes(id.boot_id);
  w.U64(id.pid_namespace);
  w.U32(id.pid);
}

Status ReadProcessIdentity(ByteReader& r, ProcessIdentity* id) {
  TANDEM_RETURN_IF_ERROR(r.Bytes(&id->boot_id, kMaxBootIdBytes, "boot id"));
  TANDEM_RETURN_IF_ERROR(r.U64(&id->pid_namespace, "pid namespace"));
  TANDEM_RETURN_IF_ERROR(r.U32(&id->pid, "pid"));
  if (id->boot_id.empty() || id->pid == 0) return InvalidArgumentError("empty process identity");
  return Status::Ok();
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) ::close(fd_);
}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

StatusOr<ProcessWatch> ProcessWatch::Open(const ProcessIdentity& self, const ProcessIdentity& peer) {
  ProcessWatch w;
  if (!self.SamePidNamespace(peer)) return w;
  long fd = ::syscall(SYS_pidfd_open, static_cast<pid_t>(peer.pid), 0);
  if (fd < 0) {
    if (errno == ESRCH) return UnavailableError(fmt::format("peer process {} is gone", peer.pid));
    return w;  // no pidfd support: nothing to watch with
  }
  w.fd_ = static_cast<int>(fd);
  return w;
}

bool ProcessWatch::Exited() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

}  // namespace tandem::kv_transfer
