// The engine's per-request phases (RequestTimes on a finished output) and its
// step observer, on a fake clock: exact durations for a chunked local prefill,
// a reservation completed later, and a request cancelled while queued.
#include <gtest/gtest.h>

#include <optional>

#include "common/base/clock.h"
#include "tests/common/engine/engine_test_util.h"

namespace tandem::engine {
namespace {

using testing::GoldenDir;
using testing::Greedy;
using testing::SmallConfig;

std::vector<TokenId> Prompt(int n) {
  std::vector<TokenId> p(n);
  for (int i = 0; i < n; ++i) p[i] = static_cast<TokenId>(3 + (i * 31) % 200);
  return p;
}

class EngineTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Create(SmallConfig(GoldenDir("llama")), std::make_unique<runtime::CpuBackend>(), clock_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
    engine_->SetStepObserver(
        [this](const scheduler::SchedulerOutput& step) { step_tokens_.push_back(step.num_batched_tokens); });
  }

  // One step after `ms` more milliseconds; keeps the finished output of `id`.
  void StepAfter(int64_t ms, RequestId id) {
    clock_.AdvanceMs(ms);
    std::vector<EngineOutput> outputs;
    engine_->StepOnce(&outputs);
    for (EngineOutput& out : outputs) {
      if (out.id == id && out.finished) finished_ = out;
      if (out.id == id && !out.finished && !out.tokens.empty() && !first_token_) first_token_ = out;
    }
  }

  FakeClock clock_{MsToNanos(1000)};
  std::unique_ptr<Engine> engine_;
  std::vector<int> step_tokens_;
  std::optional<EngineOutput> finished_;
  std::optional<EngineOutput> first_token_;  // the output with the request's first token
};

TEST_F(EngineTimesTest, ChunkedPrefillThenDecode) {
  // 40 prompt tokens in chunks of 32 and 8, then one token per step.
  engine_->Submit(Greedy(1, Prompt(40), 3));
  StepAfter(5, 1);   // admitted: the first chunk runs
  StepAfter(7, 1);   // the second chunk: first token
  StepAfter(10, 1);  // second token
  StepAfter(10, 1);  // third token: done
  StepAfter(1, 1);   // the finish record
  ASSERT_TRUE(finished_.has_value());
  const RequestTimes& t = finished_->times;
  EXPECT_TRUE(t.admitted);
  EXPECT_TRUE(t.first_token);
  EXPECT_FALSE(t.remote_first_token);
  EXPECT_NEAR(t.queued_seconds, 0.005, 1e-12);
  EXPECT_NEAR(t.prefill_seconds, 0.007, 1e-12);
  EXPECT_NEAR(t.decode_seconds, 0.020, 1e-12);
  // The first token's output already carries the queue and prefill parts.
  ASSERT_TRUE(first_token_.has_value());
  EXPECT_TRUE(first_token_->times.first_token);
  EXPECT_NEAR(first_token_->times.queued_seconds, 0.005, 1e-12);
  EXPECT_NEAR(first_token_->times.prefill_seconds, 0.007, 1e-12);
  // Tokens computed per step that ran a forward: the chunks, then a decode each
  // (the last token is sampled, never computed).
  EXPECT_EQ(step_tokens_, (std::vector<int>{32, 8, 1, 1}));
}

TEST_F(EngineTimesTest, ReservationWaitsForItsFirstToken) {
  const std::vector<TokenId> prompt = Prompt(20);
  bool reserved = false;
  engine_->Reserve(Greedy(2, prompt, 3), 60000, [&](StatusOr<scheduler::Reservation> r) { reserved = r.ok(); });
  StepAfter(2, 2);  // granted: admitted
  ASSERT_TRUE(reserved);
  clock_.AdvanceMs(30);
  engine_->CompleteReservation(2, prompt.front());
  StepAfter(0, 2);  // the first token joins the batch; the second is sampled
  StepAfter(4, 2);  // third token: done
  StepAfter(1, 2);
  ASSERT_TRUE(finished_.has_value());
  const RequestTimes& t = finished_->times;
  EXPECT_TRUE(t.admitted);
  EXPECT_TRUE(t.remote_first_token);
  EXPECT_NEAR(t.queued_seconds, 0.002, 1e-12);
  EXPECT_NEAR(t.prefill_seconds, 0.030, 1e-12);
  EXPECT_NEAR(t.decode_seconds, 0.004, 1e-12);
  ASSERT_TRUE(first_token_.has_value());
  EXPECT_TRUE(first_token_->times.remote_first_token);
  EXPECT_NEAR(first_token_->times.queued_seconds, 0.002, 1e-12);
  EXPECT_NEAR(first_token_->times.prefill_seconds, 0.030, 1e-12);
}

TEST_F(EngineTimesTest, CancelledWhileQueuedWasNeverAdmitted) {
  engine_->Submit(Greedy(3, Prompt(8), 3));
  engine_->Cancel(3);
  StepAfter(9, 3);
  ASSERT_TRUE(finished_.has_value());
  EXPECT_EQ(finished_->finish_reason, scheduler::FinishReason::kCancelled);
  EXPECT_FALSE(finished_->times.admitted);
  EXPECT_FALSE(finished_->times.first_token);
  EXPECT_NEAR(finished_->times.queued_seconds, 0.009, 1e-12);
  EXPECT_TRUE(step_tokens_.empty());
}

}  // namespace
}  // namespace tandem::engine
