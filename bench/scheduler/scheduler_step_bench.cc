// Scheduler CPU time per step: 256 running sequences with 4K-token contexts
// (decode steps), plus a mixed variant with chunked prefills of new prompts.
// Target (issue 4, PERFORMANCE.md): <= 100 us per step, i.e. <= 1 % of a 10 ms
// GPU step. Prints a table; the ratio column is time / 100 us target.
//
//   scheduler_step_bench [--steps N] [--seqs N] [--context N]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/scheduler/scheduler.h"

namespace tandem::scheduler {
namespace {

int64_t ThreadCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<TokenId> Tokens(int n, uint32_t seed) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = static_cast<TokenId>(x % 128000);
  }
  return t;
}

struct Args {
  int steps = 2000;
  int seqs = 256;
  int context = 4096;
};

struct Stats {
  double median_us, p99_us, mean_us;
};

Stats Summarize(std::vector<int64_t> ns) {
  std::sort(ns.begin(), ns.end());
  double sum = 0;
  for (auto v : ns) sum += static_cast<double>(v);
  return {ns[ns.size() / 2] / 1e3, ns[ns.size() * 99 / 100] / 1e3, sum / ns.size() / 1e3};
}

void PrintRow(const char* name, const char* what, Stats s) {
  std::printf("| %-28s | %-22s | %8.2f | %8.2f | %8.2f | %6.3f |\n", name, what, s.median_us, s.p99_us, s.mean_us,
              s.median_us / 100.0);
}

// Builds a scheduler whose `seqs` sequences are running with `context` tokens in
// cache, entered as completed reservations (what a decode node sees).
// With `stagger`, lengths differ by up to 15 tokens so block boundaries are
// crossed on different steps (as in real traffic); without, all cross together.
void Fill(Scheduler* s, const Args& a, int first_id, bool stagger) {
  for (int i = 0; i < a.seqs; ++i) {
    SequenceParams p;
    p.id = static_cast<RequestId>(first_id + i);
    p.tenant_salt = "tenant-" + std::to_string(i % 4);
    p.prompt_tokens = Tokens(a.context - (stagger ? i % 16 : 0), static_cast<uint32_t>(i));
    p.max_tokens = a.steps + 64;
    auto r = s->Reserve(std::move(p), 1'000'000);
    if (!r.ok()) {
      std::fprintf(stderr, "reserve failed: %s\n", r.status().ToString().c_str());
      std::exit(1);
    }
    auto done = s->CompleteReservation(static_cast<RequestId>(first_id + i), 1);
    if (!done.ok()) std::exit(1);
  }
}

void RunDecode(const Args& a, bool prefix_caching, bool stagger) {
  SystemClock clock;
  SchedulerConfig cfg;
  cfg.max_num_seqs = a.seqs;
  cfg.max_model_len = a.context + a.steps + 128;
  kv_cache::KvCacheConfig kv;
  kv.block_size = 16;
  kv.num_device_blocks = a.seqs * ((a.context + a.steps + 64) / 16 + 2);
  kv.num_host_blocks = 8192;
  kv.model_id = "llama-3-8b";
  kv.enable_prefix_caching = prefix_caching;
  Scheduler s(cfg, kv, clock);
  Fill(&s, a, 1, stagger);
  std::vector<int64_t> sched_ns, total_ns;
  size_t batch = 0;
  for (int step = 0; step < a.steps; ++step) {
    int64_t t0 = ThreadCpuNanos();
    SchedulerOutput out = s.Schedule();
    int64_t t1 = ThreadCpuNanos();
    batch = out.scheduled.size();
    for (const auto& e : out.scheduled) {
      if (e.needs_logits) (void)s.AppendToken(e.id, static_cast<TokenId>(step + 7));
    }
    int64_t t2 = ThreadCpuNanos();
    sched_ns.push_back(t1 - t0);
    total_ns.push_back(t2 - t0);
  }
  char name[64];
  std::snprintf(name, sizeof(name), "decode %zux%d%s%s", batch, a.context, stagger ? "" : " aligned",
                prefix_caching ? "" : " no-prefix");
  PrintRow(name, "Schedule()", Summarize(sched_ns));
  PrintRow(name, "Schedule()+AppendToken", Summarize(total_ns));
}

// 248 decodes + new 4K prompts admitted and prefilled in 1K chunks, repeatedly.
void RunMixed(const Args& a) {
  SystemClock clock;
  SchedulerConfig cfg;
  cfg.max_num_seqs = a.seqs;
  cfg.max_num_batched_tokens = 2048;
  cfg.max_prefill_chunk_tokens = 1024;
  cfg.max_model_len = a.context + a.steps + 128;
  kv_cache::KvCacheConfig kv;
  kv.block_size = 16;
  kv.num_device_blocks = a.seqs * ((a.context + a.steps + 64) / 16 + 2);
  kv.num_host_blocks = 8192;
  kv.model_id = "llama-3-8b";
  Scheduler s(cfg, kv, clock);
  Args fill = a;
  fill.seqs = a.seqs - 8;
  Fill(&s, fill, 1, true);
  int next_id = 1'000'000;
  std::vector<int64_t> total_ns;
  for (int step = 0; step < a.steps; ++step) {
    auto c = s.Counters();
    if (c.num_waiting < 2 && c.num_running < a.seqs) {
      SequenceParams p;
      p.id = static_cast<RequestId>(next_id++);
      p.prompt_tokens = Tokens(a.context, static_cast<uint32_t>(next_id));
      p.max_tokens = 4;
      (void)s.AddRequest(std::move(p));
    }
    int64_t t0 = ThreadCpuNanos();
    SchedulerOutput out = s.Schedule();
    for (const auto& e : out.scheduled) {
      if (e.needs_logits) (void)s.AppendToken(e.id, static_cast<TokenId>(step + 7));
    }
    total_ns.push_back(ThreadCpuNanos() - t0);
  }
  PrintRow("mixed 248 decode + prefill", "Schedule()+AppendToken", Summarize(total_ns));
}

}  // namespace
}  // namespace tandem::scheduler

int main(int argc, char** argv) {
  tandem::scheduler::Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) a.steps = std::max(10, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--seqs")) a.seqs = std::max(9, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--context")) a.context = std::max(16, std::atoi(argv[i + 1]));
  }
  std::printf("scheduler CPU time per step (thread CPU time), %d steps, target 100 us\n\n", a.steps);
  std::printf("| %-28s | %-22s | %8s | %8s | %8s | %6s |\n", "scenario", "measured", "p50 us", "p99 us", "mean us",
              "p50/target");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(30, '-').c_str(), std::string(24, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(10, '-').c_str(),
              std::string(8, '-').c_str());
  tandem::scheduler::RunDecode(a, /*prefix_caching=*/true, /*stagger=*/true);
  tandem::scheduler::RunDecode(a, /*prefix_caching=*/false, /*stagger=*/true);
  tandem::scheduler::RunDecode(a, /*prefix_caching=*/true, /*stagger=*/false);
  tandem::scheduler::RunMixed(a);
  return 0;
}
