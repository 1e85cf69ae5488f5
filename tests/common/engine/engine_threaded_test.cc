// The engine on its own thread, fed from several client threads (runs under TSan in CI).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/engine/engine.h"
#include "tests/common/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

TEST(EngineThreadedTest, ManyClientsGetExactlyOneEndEach) {
  std::string dir = testing::GoldenDir("llama");
  auto engine = testing::MakeEngine(testing::SmallConfig(dir));
  std::mutex mu;
  std::condition_variable cv;
  std::map<RequestId, int> ends;
  std::map<RequestId, int> tokens;
  engine->Start([&](std::vector<EngineOutput>&& outputs) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& o : outputs) {
      tokens[o.id] += static_cast<int>(o.tokens.size());
      if (o.finished) ++ends[o.id];
    }
    cv.notify_all();
  });
  constexpr int kThreads = 4, kPerThread = 6;
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        RequestId id = t * 100 + i + 1;
        std::vector<TokenId> prompt(5 + i * 3, 7 + t);
        engine->Submit(testing::Greedy(id, prompt, 8));
        if (i % 3 == 2) engine->Cancel(id);
      }
    });
  }
  for (auto& c : clients) c.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60),
                            [&] { return ends.size() == static_cast<size_t>(kThreads * kPerThread); }));
  }
  engine->Stop();
  for (auto& [id, n] : ends) EXPECT_EQ(n, 1) << "request " << id;
  for (auto& [id, n] : tokens) EXPECT_LE(n, 8);
  scheduler::SchedulerCounters c = engine->Counters();
  EXPECT_EQ(c.kv.device.referenced_blocks, 0);
  EXPECT_EQ(c.num_running + c.num_waiting + c.num_swapped, 0);
}

// A remote prefill's first token (CompleteReservation) goes to the sink before the
// forward of the step that takes the request into the batch, not after it: the
// client's first token does not wait one whole decode step.
TEST(EngineThreadedTest, RemoteFirstTokenReachesTheSinkBeforeTheNextForward) {
  std::string dir = testing::GoldenDir("llama");
  auto engine = testing::MakeEngine(testing::SmallConfig(dir));
  constexpr RequestId kId = 7;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<TokenId> seen;  // kId's tokens as the sink got them
  bool finished = false;
  std::vector<size_t> seen_at_forward;  // tokens seen when a forward with kId began
  ForwardObserver observer;
  observer.on_begin = [&](const scheduler::SchedulerOutput& step) {
    std::lock_guard<std::mutex> lock(mu);
    for (const scheduler::ScheduledSequence& s : step.scheduled) {
      if (s.id == kId) seen_at_forward.push_back(seen.size());
    }
    return false;
  };
  engine->SetForwardObserver(std::move(observer));
  engine->Start([&](std::vector<EngineOutput>&& outputs) {
    std::lock_guard<std::mutex> lock(mu);
    for (const EngineOutput& o : outputs) {
      if (o.id != kId) continue;
      seen.insert(seen.end(), o.tokens.begin(), o.tokens.end());
      finished = finished || o.finished;
    }
    cv.notify_all();
  });
  const std::vector<TokenId> prompt(20, 11);
  std::promise<bool> reserved;
  engine->Reserve(testing::Greedy(kId, prompt, 3), 60000,
                  [&](StatusOr<scheduler::Reservation> r) { reserved.set_value(r.ok()); });
  ASSERT_TRUE(reserved.get_future().get());
  engine->CompleteReservation(kId, 5);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished; }));
  }
  engine->Stop();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), 5);
  ASSERT_FALSE(seen_at_forward.empty()) << "no forward ran for the request";
  EXPECT_EQ(seen_at_forward.front(), 1u) << "the first token reached the sink only after the next forward began";
}

}  // namespace
}  // namespace tandem::engine
