// Which process of which host a transport endpoint lives in, for the backends
// that depend on it: cuda_ipc works only between processes of one host, and the
// GPU backends watch a same-host peer's process so that a peer killed mid-transfer
// ends its batches within milliseconds instead of a lease. The host is named by
// the kernel's boot id; a pid means something only in the same pid namespace.
// Thread rule: ProcessIdentity is a value type; a ProcessWatch has one owner.
#pragma once

#include <cstdint>
#include <string>

#include "common/base/status.h"
#include "kv_transfer/wire.h"

namespace tandem::kv_transfer {

struct ProcessIdentity {
  std::string boot_id;         // /proc/sys/kernel/random/boot_id (36 characters)
  uint64_t pid_namespace = 0;  // inode of /proc/self/ns/pid; 0 when unknown
  uint32_t pid = 0;

  bool SameHost(const ProcessIdentity& other) const { return !boot_id.empty() && boot_id == other.boot_id; }
  // Same host and pid namespace: `pid` names the same process for both.
  bool SamePidNamespace(const ProcessIdentity& other) const {
    return SameHost(other) && pid_namespace != 0 && pid_namespace == other.pid_namespace;
  }
};

// This process. Internal error when /proc cannot be read.
StatusOr<ProcessIdentity> SelfIdentity();

// Wire form: bytes boot_id (<= 64) | u64 pid_namespace | u32 pid.
void WriteProcessIdentity(ByteWriter& w, const ProcessIdentity& id);
Status ReadProcessIdentity(ByteReader& r, ProcessIdentity* id);

// Watches a process of this host through a pidfd (immune to pid reuse).
// Move-only owner of the descriptor.
class ProcessWatch {
 public:
  ProcessWatch() = default;  // watches nothing: never reports an exit
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ProcessWatch& operator=(ProcessWatch&& o) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Watches `peer` when it shares this process's pid namespace (else watches
  // nothing: its pid means another process here). Unavailable when it is
  // already gone.
  static StatusOr<ProcessWatch> Open(const ProcessIdentity& self, const ProcessIdentity& peer);

  bool watching() const { return fd_ >= 0; }
  // True once the process has exited (never blocks).
  bool Exited() const;

 private:
  int fd_ = -1;
};

}  // namespace tandem::kv_transfer
