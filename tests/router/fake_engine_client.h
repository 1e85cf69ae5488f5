// FakeEngineClient: an EngineClient that plays a scripted token sequence.
//
// Each request runs on its own thread: it emits the script (cycled as needed)
// in batches of `batch_size`, ends with kStop after an EOS (unless
// ignore_eos) or a stop token id, or kLength at max_tokens; before min_tokens
// it skips the script's stop tokens (the engine masks them), or fails with `fail_with` after `fail_after` tokens.
// `hold_after` tokens it waits until cancelled (for disconnect tests). With
// `error_on_cancel` a cancelled request ends with on_error(Cancelled), as the
// cluster engine's do.
// Records every request and every Cancel. Thread rule: thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "router/engine_client.h"
#include "tests/router/fake_text_codec.h"

namespace tandem::router::testing {

// The fake's logprobs of token `id` (a request with logprobs = k): logprob
// -(id % 8) / 4 - 0.25, and top entries 0, 1, ..., k - 1 with logprobs -(j + 1) / 2.
inline TokenLogprobs FakeLogprobs(TokenId id, int k) {
  TokenLogprobs out;
  out.logprob = -static_cast<float>(id % 8) / 4.0f - 0.25f;
  for (int j = 0; j < k; ++j) out.top.push_back({j, -static_cast<float>(j + 1) / 2.0f});
  return out;
}

struct Script {
  std::vector<TokenId> tokens;  // played in order, cycled
  int32_t batch_size = 1;
  int32_t cached_tokens = 0;
  int32_t fail_after = -1;  // >= 0: on_error(fail_with) after this many tokens
  int32_t hold_after = -1;  // >= 0: stop emitting after this many tokens until cancelled
  int32_t step_delay_ms = 0;
  bool error_on_cancel = false;
  Status fail_with = UnavailableError("decode node lost");
  bool drop_logprobs = false;  // send no logprobs even when asked (a node of an older build)
  std::optional<NodeStageTimes> stage_times{};  // reported with the first tokens
};

class FakeEngineClient : public EngineClient {
 public:
  ~FakeEngineClient() override { Shutdown(); }

  // The script for a request (default: the same for all).
  void SetScript(Script script) {
    std::lock_guard<std::mutex> lock(mu_);
    script_fn_ = [script](const GenerateRequest&) { return script; };
  }
  void SetScriptFn(std::function<Script(const GenerateRequest&)> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    script_fn_ = std::move(fn);
  }

  void Submit(GenerateRequest request, StreamCallbacks callbacks) override {
    std::lock_guard<std::mutex> lock(mu_);
    Script script = script_fn_(request);
    submitted_.push_back(request);
    threads_.emplace_back(
        [this, request, script, callbacks = std::move(callbacks)] { Play(request, script, callbacks); });
  }

  void Cancel(RequestId id) override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.insert(id);
    cv_.notify_all();
  }

  // Joins every request thread (cancelling the held ones).
  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
      cv_.notify_all();
    }
    for (;;) {
      std::vector<std::thread> threads;
      {
        std::lock_guard<std::mutex> lock(mu_);
        threads.swap(threads_);
      }
      if (threads.empty()) break;
      for (auto& t : threads) t.join();
    }
  }

  std::vector<GenerateRequest> submitted() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_;
  }
  std::set<RequestId> cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  // Waits until `id` is cancelled; false on timeout.
  bool WaitCancelled(RequestId id, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return cancelled_.count(id) > 0; });
  }
  int active() const { return active_.load(); }

 private:
  bool IsCancelled(RequestId id) {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_.count(id) > 0 || shutdown_;
  }

  void Play(const GenerateRequest& request, const Script& script, const StreamCallbacks& cb) {
    ++active_;
    int32_t produced = 0;
    size_t pos = 0;
    if (script.cached_tokens > 0 && cb.on_cached) cb.on_cached(script.cached_tokens);
    for (;;) {
      if (IsCancelled(request.request_id)) {
        if (script.error_on_cancel) cb.on_error(CancelledError("request cancelled"));
        break;
      }
      if (script.hold_after >= 0 && produced >= script.hold_after) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return cancelled_.count(request.request_id) > 0 || shutdown_; });
        lock.unlock();
        if (script.error_on_cancel) cb.on_error(CancelledError("request cancelled"));
        break;
      }
      if (script.fail_after >= 0 && produced >= script.fail_after) {
        cb.on_error(script.fail_with);
        break;
      }
      std::vector<TokenId> batch;
      bool stop = false;
      size_t skipped = 0;  // a script of stop tokens only is played anyway
      while (static_cast<int32_t>(batch.size()) < script.batch_size && produced < request.max_tokens) {
        const TokenId id = script.tokens[pos++ % script.tokens.size()];
        const bool is_stop_id =
            std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), id) != request.stop_token_ids.end();
        const bool stops = (id == kEos && !request.ignore_eos) || is_stop_id;
        if (stops && produced < request.min_tokens && ++skipped < script.tokens.size()) continue;
        skipped = 0;
        batch.push_back(id);
        ++produced;
        if (stops) {
          stop = true;
          break;
        }
      }
      if (script.step_delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(script.step_delay_ms));
      }
      std::vector<TokenLogprobs> logprobs;
      if (request.logprobs >= 0 && !script.drop_logprobs) {
        for (TokenId id : batch) logprobs.push_back(FakeLogprobs(id, request.logprobs));
      }
      if (produced == static_cast<int32_t>(batch.size()) && script.stage_times && cb.on_stage_times) {
        cb.on_stage_times(*script.stage_times);
      }
      if (produced == static_cast<int32_t>(batch.size()) && request.prompt_logprobs >= 0 && cb.on_prompt_logprobs &&
          !script.drop_logprobs) {
        std::vector<TokenLogprobs> prompt;  // one per prompt token after the first
        for (size_t t = 1; t < request.prompt_token_ids.size(); ++t) {
          prompt.push_back(FakeLogprobs(request.prompt_token_ids[t], request.prompt_logprobs));
        }
        cb.on_prompt_logprobs(std::move(prompt));
      }
      cb.on_tokens(batch, std::move(logprobs));
      if (stop || produced >= request.max_tokens) {
        cb.on_finish({stop ? FinishReason::kStop : FinishReason::kLength, script.cached_tokens});
        break;
      }
    }
    --active_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Script(const GenerateRequest&)> script_fn_ = [](const GenerateRequest&) {
    return Script{{kWordBase, kWordBase + 1, kEos}};
  };
  std::vector<GenerateRequest> submitted_;
  std::set<RequestId> cancelled_;
  std::vector<std::thread> threads_;
  bool shutdown_ = false;
  std::atomic<int> active_{0};
};

}  // namespace tandem::router::testing
