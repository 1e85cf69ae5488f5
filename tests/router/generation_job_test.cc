// GenerationJob without sockets: a FakeEngineClient and a serial executor the test drains.
#include "router/generation_job.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <mutex>

#include "tests/router/fake_engine_client.h"
#include "tests/router/fake_text_codec.h"

namespace tandem::router::testing {
namespace {

// A serial executor: posted work runs when the test thread calls RunUntil.
class ManualExecutor {
 public:
  GenerationJob::Post post() {
    return [this](std::function<void()> fn) {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    };
  }
  bool RunUntil(const std::function<bool()>& done, int timeout_ms = 5000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::function<void()> fn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!queue_.empty()) {
          fn = std::move(queue_.front());
          queue_.pop_front();
        }
      }
      if (fn) {
        fn();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    return true;
  }

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
};

struct Recorder {
  std::vector<std::string> text;
  std::vector<int> order;
  std::optional<Status> done;
  JobEvents Events() {
    JobEvents e;
    e.on_text = [this](int32_t i, const std::string& t, std::vector<ChoiceLogprob>) {
      text[i] += t;
      order.push_back(i);
    };
    e.on_done = [this](const Status& s) { done = s; };
    return e;
  }
};

TEST(GenerationJobTest, StopStringCancelsAndCountsTokens) {
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  std::vector<TokenId> script = ByteTokens("12STOP34");
  engine.SetScript({script, /*batch_size=*/3});
  JobSpec spec;
  spec.prompts = {{1, 2}};
  spec.base.max_tokens = 20;
  spec.stop = {"STOP"};
  Recorder rec;
  rec.text.resize(1);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec.Events());
  job->Start();
  ASSERT_TRUE(exec.RunUntil([&] { return rec.done.has_value(); }));
  EXPECT_TRUE(rec.done->ok());
  EXPECT_EQ(rec.text[0], "12");
  EXPECT_EQ(job->outputs()[0].text, "12");
  EXPECT_EQ(job->outputs()[0].finish_reason, FinishReason::kStop);
  // Batches of 3: "12S", "TOP" -> the match completes on the 6th token.
  EXPECT_EQ(job->usage().completion_tokens, 6);
  EXPECT_EQ(job->usage().prompt_tokens, 2);
  EXPECT_TRUE(engine.WaitCancelled(engine.submitted()[0].request_id, 1000));
  engine.Shutdown();
}

TEST(GenerationJobTest, StopStringKeepsTheCachedTokensReportedEarly) {
  // The router ends the request on the stop string, so the engine's on_finish never
  // comes: usage.cached_tokens must come from on_cached (decode's first Tokens entry).
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  Script script{ByteTokens("12STOP34"), /*batch_size=*/3};
  script.cached_tokens = 16;
  engine.SetScript(script);
  JobSpec spec;
  spec.prompts = {std::vector<TokenId>(20, 5)};
  spec.base.max_tokens = 20;
  spec.stop = {"STOP"};
  Recorder rec;
  rec.text.resize(1);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec.Events());
  job->Start();
  ASSERT_TRUE(exec.RunUntil([&] { return rec.done.has_value(); }));
  EXPECT_EQ(job->outputs()[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(job->usage().cached_tokens, 16);
  EXPECT_EQ(job->usage().prompt_tokens, 20);
  engine.Shutdown();
}

// The cluster engine ends a cancelled request with on_error(Cancelled). After a stop
// string that error belongs to a finished choice: it must not end the job or its siblings.
TEST(GenerationJobTest, CancelledErrorOfAStoppedChoiceLeavesTheOthersRunning) {
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  engine.SetScriptFn([](const GenerateRequest& r) {
    Script s{ByteTokens(*r.sampling.seed == 10 ? "12STOP34" : "abcdef"), /*batch_size=*/3};
    s.error_on_cancel = true;
    // The stopped choice sees its Cancel before it reaches max_tokens; the other one
    // ends well after the stopped one's error came.
    s.step_delay_ms = *r.sampling.seed == 10 ? 20 : 50;
    return s;
  });
  JobSpec spec;
  spec.prompts = {{1}};
  spec.n = 2;
  spec.base.max_tokens = 12;
  spec.base.sampling.seed = 10;
  spec.stop = {"STOP"};
  Recorder rec;
  rec.text.resize(2);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec.Events());
  job->Start();
  ASSERT_TRUE(exec.RunUntil([&] { return rec.done.has_value(); }));
  EXPECT_TRUE(rec.done->ok()) << rec.done->ToString();
  EXPECT_EQ(job->outputs()[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(job->outputs()[0].text, "12");
  EXPECT_EQ(job->outputs()[1].finish_reason, FinishReason::kLength);
  EXPECT_EQ(job->outputs()[1].text, "abcdefabcdef");
  EXPECT_EQ(engine.cancelled().count(engine.submitted()[1].request_id), 0u) << "the sibling was cancelled";
  engine.Shutdown();
}

TEST(GenerationJobTest, ErrorEndsJobAndCancelsOthers) {
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  engine.SetScriptFn([](const GenerateRequest& r) {
    Script s{{kWordBase}};
    if (*r.sampling.seed == 11)
      s.fail_after = 1;
    else
      s.hold_after = 1;
    return s;
  });
  JobSpec spec;
  spec.prompts = {{1}};
  spec.n = 2;
  spec.base.max_tokens = 20;
  spec.base.sampling.seed = 10;
  Recorder rec;
  rec.text.resize(2);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec.Events());
  job->Start();
  ASSERT_TRUE(exec.RunUntil([&] { return rec.done.has_value(); }));
  EXPECT_EQ(rec.done->code(), StatusCode::kUnavailable);
  // The healthy sibling (seed 10) is cancelled.
  EXPECT_TRUE(engine.WaitCancelled(engine.submitted()[0].request_id, 1000));
  engine.Shutdown();
}

TEST(GenerationJobTest, TokensWithoutTheLogprobsAskedForFailTheJobAndCancel) {
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  Script script{{kWordBase}};
  script.hold_after = 1;
  script.drop_logprobs = true;
  engine.SetScript(script);
  JobSpec spec;
  spec.prompts = {{1}};
  spec.base.max_tokens = 20;
  spec.base.logprobs = 2;
  Recorder rec;
  rec.text.resize(1);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec.Events());
  job->Start();
  ASSERT_TRUE(exec.RunUntil([&] { return rec.done.has_value(); }));
  EXPECT_EQ(rec.done->code(), StatusCode::kInternal);
  EXPECT_TRUE(rec.text[0].empty()) << "no text without its logprobs";
  EXPECT_TRUE(engine.WaitCancelled(engine.submitted()[0].request_id, 1000));
  engine.Shutdown();
}

TEST(GenerationJobTest, CancelStopsEventsAndEngine) {
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  engine.SetScript({{kWordBase}, 1, 0, -1, /*hold_after=*/1});
  JobSpec spec;
  spec.prompts = {{1}};
  spec.base.max_tokens = 20;
  Recorder rec;
  rec.text.resize(1);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec.Events());
  job->Start();
  ASSERT_TRUE(exec.RunUntil([&] { return !rec.text[0].empty(); }));
  job->Cancel();
  EXPECT_TRUE(engine.WaitCancelled(engine.submitted()[0].request_id, 1000));
  exec.RunUntil([] { return false; }, 50);
  EXPECT_FALSE(rec.done.has_value());
  EXPECT_EQ(rec.text[0], "Hello");
  engine.Shutdown();
}

// Runs one choice of `spec` over `script` to the end; returns the job.
std::shared_ptr<GenerationJob> RunOne(const Script& script, JobSpec spec, Recorder* rec) {
  FakeEngineClient engine;
  FakeTextCodec codec;
  ManualExecutor exec;
  engine.SetScript(script);
  if (spec.prompts.empty()) spec.prompts = {{1}};
  rec->text.resize(1);
  auto job = GenerationJob::Create(&engine, &codec, exec.post(), spec, rec->Events());
  job->Start();
  EXPECT_TRUE(exec.RunUntil([&] { return rec->done.has_value(); }));
  engine.Shutdown();
  return job;
}

// vLLM semantics: the token that ends the sequence (a stop id; EOS unless ignore_eos)
// adds no text unless include_stop_str_in_output; it still counts as a completion token.
TEST(GenerationJobTest, TheEndingTokenAddsTextOnlyWhenAskedFor) {
  const TokenId bang = kWordBase + 3;  // "!"
  for (bool include : {false, true}) {
    JobSpec spec;
    spec.base.max_tokens = 10;
    spec.base.stop_token_ids = {bang};
    spec.include_stop_str_in_output = include;
    Recorder rec;
    auto job = RunOne({{kWordBase, kWordBase + 1, bang, kWordBase + 4}}, spec, &rec);
    EXPECT_EQ(job->outputs()[0].text, include ? "Hello world!" : "Hello world");
    EXPECT_EQ(rec.text[0], job->outputs()[0].text) << "streamed as returned";
    EXPECT_EQ(job->outputs()[0].finish_reason, FinishReason::kStop);
    EXPECT_EQ(job->usage().completion_tokens, 3);
  }
  // EOS, with special tokens kept: its text only when asked for, and always when it does not end the output.
  JobSpec spec;
  spec.base.max_tokens = 3;
  spec.skip_special_tokens = false;
  spec.eos_token_ids = {kEos};
  Recorder plain, kept, ignored;
  EXPECT_EQ(RunOne({{kWordBase, kEos}}, spec, &plain)->outputs()[0].text, "Hello");
  spec.include_stop_str_in_output = true;
  EXPECT_EQ(RunOne({{kWordBase, kEos}}, spec, &kept)->outputs()[0].text, "Hello<eos>");
  spec.include_stop_str_in_output = false;
  spec.base.ignore_eos = true;
  EXPECT_EQ(RunOne({{kWordBase, kEos, kWordBase + 1}}, spec, &ignored)->outputs()[0].text, "Hello<eos> world");
}

// vLLM checks stop strings only once more than min_tokens tokens are out, and the
// engine masks stop tokens until then.
TEST(GenerationJobTest, MinTokensHoldsOffStopStringsAndStopTokens) {
  const Script script{ByteTokens("ab STOP cd STOP ef")};
  for (int min_tokens : {0, 6, 7}) {
    JobSpec spec;
    spec.base.max_tokens = 30;
    spec.base.min_tokens = min_tokens;
    spec.stop = {"STOP"};
    Recorder rec;
    auto job = RunOne(script, spec, &rec);
    // The first STOP completes with the 7th token: it ends the output unless min_tokens >= 7.
    EXPECT_EQ(job->outputs()[0].text, min_tokens < 7 ? "ab " : "ab STOP cd ") << min_tokens;
    EXPECT_EQ(job->usage().completion_tokens, min_tokens < 7 ? 7 : 15) << min_tokens;
    EXPECT_EQ(job->outputs()[0].finish_reason, FinishReason::kStop);
  }
  JobSpec spec;
  spec.base.max_tokens = 10;
  spec.base.min_tokens = 4;
  Recorder rec;
  auto job = RunOne({{kWordBase, kEos}}, spec, &rec);  // EOS is skipped until 4 tokens are out
  EXPECT_EQ(job->outputs()[0].text, "HelloHelloHelloHello");
  EXPECT_EQ(job->usage().completion_tokens, 5);
  EXPECT_EQ(job->outputs()[0].finish_reason, FinishReason::kStop);
}

}  // namespace
}  // namespace tandem::router::testing
