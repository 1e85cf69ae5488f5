#include "kv_transfer/peer_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace tandem::kv_transfer {
namespace {

TEST(PeerProcessTest, IdentityRoundTripsAndNamesThisHost) {
  auto self = SelfIdentity();
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_EQ(self->boot_id.size(), 36u);
  EXPECT_EQ(self->pid, static_cast<uint32_t>(getpid()));
  EXPECT_NE(self->pid_namespace, 0u);
  ByteWriter w;
  WriteProcessIdentity(w, *self);
  std::string bytes = w.Take();
  ProcessIdentity back;
  ByteReader r(bytes);
  ASSERT_TRUE(ReadProcessIdentity(r, &back).ok());
  EXPECT_TRUE(r.ExpectEnd().ok());
  EXPECT_TRUE(back.SamePidNamespace(*self));
  ProcessIdentity other = back;
  other.boot_id[0] = other.boot_id[0] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(other.SameHost(*self));
  for (size_t n = 0; n < bytes.size(); ++n) {
    ByteReader cut(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(ReadProcessIdentity(cut, &back).ok()) << n;
  }
}

TEST(PeerProcessTest, WatchSeesAKilledProcessAndNotALiveOne) {
  auto self = *SelfIdentity();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  ProcessIdentity peer = self;
  peer.pid = static_cast<uint32_t>(child);
  auto watch = ProcessWatch::Open(self, peer);
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(watch->watching());
  EXPECT_FALSE(watch->Exited());
  kill(child, SIGKILL);
  auto start = std::chrono::steady_clock::now();
  while (!watch->Exited() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(watch->Exited());
  waitpid(child, nullptr, 0);
  EXPECT_EQ(ProcessWatch::Open(self, peer).status().code(), StatusCode::kUnavailable) << "reaped: gone";
  ProcessIdentity foreign = peer;
  foreign.pid_namespace += 1;
  auto unwatched = ProcessWatch::Open(self, foreign);
  ASSERT_TRUE(unwatched.ok());
  EXPECT_FALSE(unwatched->watching()) << "a pid of another namespace names nothing here";
  EXPECT_FALSE(unwatched->Exited());
}

}  // namespace
}  // namespace tandem::kv_transfer
