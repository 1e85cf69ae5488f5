#include "router/cluster/room_queue.h"

#include <gtest/gtest.h>

namespace tandem::router::cluster {
namespace {

constexpr PriorityClass kInteractive = PriorityClass::kInteractive;
constexpr PriorityClass kBatch = PriorityClass::kBatch;

TEST(RoomQueueTest, TheMoreUrgentClassThenTheOlderGoesFirst) {
  RoomQueue q;
  q.Wait(/*id=*/1, kBatch, /*arrival=*/1, /*timer_seq=*/10);
  q.Wait(2, kBatch, 2, 20);
  q.Wait(3, kInteractive, 3, 30);
  EXPECT_EQ(q.size(), 3u);
  // Only the first may try; a newcomer of either class is behind someone.
  EXPECT_FALSE(q.MayTry(1, kBatch, 1));
  EXPECT_FALSE(q.MayTry(2, kBatch, 2));
  EXPECT_FALSE(q.MayTry(4, kInteractive, 4));
  EXPECT_TRUE(q.MayTry(3, kInteractive, 3));
  // Trying, it keeps its place: those behind it still wait.
  EXPECT_FALSE(q.MayTry(1, kBatch, 1));
  EXPECT_FALSE(q.MayTry(5, kInteractive, 5));
  // Refused again, it waits at the same place; once it has room, the next is first.
  q.Wait(3, kInteractive, 3, 31);
  EXPECT_FALSE(q.MayTry(1, kBatch, 1));
  q.Remove(3);
  EXPECT_TRUE(q.MayTry(1, kBatch, 1));
  EXPECT_FALSE(q.MayTry(2, kBatch, 2));
  EXPECT_TRUE(q.Remove(1));
  EXPECT_FALSE(q.Remove(1)) << "not queued any more";
  EXPECT_TRUE(q.MayTry(2, kBatch, 2));
  q.Remove(2);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(q.MayTry(6, kBatch, 6)) << "nobody waits";
}

TEST(RoomQueueTest, WakesTheFirstNotTryingEachOfWhichMayTryBesideThoseAhead) {
  RoomQueue q;
  EXPECT_FALSE(q.WakeFirst().has_value());
  q.Wait(1, kInteractive, 1, 10);
  q.Wait(2, kInteractive, 2, 20);
  q.Wait(3, kInteractive, 3, 30);
  // Two requests ended: the first two waiters are woken, each with its timer's sequence.
  std::optional<RoomQueue::Wake> a = q.WakeFirst();
  std::optional<RoomQueue::Wake> b = q.WakeFirst();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->id, 1u);
  EXPECT_EQ(a->timer_seq, 10u);
  EXPECT_EQ(b->id, 2u);
  EXPECT_EQ(b->timer_seq, 20u);
  // The second tries beside the first; the third, not woken, waits behind both.
  EXPECT_TRUE(q.MayTry(2, kInteractive, 2));
  EXPECT_FALSE(q.MayTry(3, kInteractive, 3));
  EXPECT_TRUE(q.MayTry(1, kInteractive, 1));
  // The first is refused and waits again (no longer trying): the next wake is its.
  q.Wait(1, kInteractive, 1, 11);
  std::optional<RoomQueue::Wake> c = q.WakeFirst();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, 1u);
  EXPECT_EQ(c->timer_seq, 11u);
  std::optional<RoomQueue::Wake> d = q.WakeFirst();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, 3u);
  EXPECT_FALSE(q.WakeFirst().has_value()) << "every waiter is trying";
}

TEST(RoomQueueTest, AWokenWaiterStillWaitsBehindOneThatIsNotTrying) {
  RoomQueue q;
  q.Wait(1, kBatch, 1, 10);
  ASSERT_TRUE(q.WakeFirst());
  q.Wait(2, kBatch, 2, 20);
  ASSERT_TRUE(q.WakeFirst());
  // 1 was refused meanwhile and waits again: 2, though woken, is behind it.
  q.Wait(1, kBatch, 1, 11);
  EXPECT_FALSE(q.MayTry(2, kBatch, 2));
  EXPECT_TRUE(q.MayTry(1, kBatch, 1));
  EXPECT_TRUE(q.MayTry(2, kBatch, 2));
}

}  // namespace
}  // namespace tandem::router::cluster
