// In-process disaggregated serving: a test router (RpcServer) drives a real
// DecodeNode and a real PrefillNode over the control protocol, with the KV
// handoff over the `local` transport (LocalFabric) and, where built, UCX over
// tcp. Oracle: a separate single Engine generating the same prompts greedily.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <map>
#include <optional>
#include <thread>

#include "common/engine/backend_factory.h"
#include "common/runtime/cpu_backend.h"
#include "decode_node/decode_node.h"
#include "kv_transfer/fault/fault_transport.h"
#include "kv_transfer/local/local_transport.h"
#include "prefill_node/prefill_node.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/decode_node/test_router.h"
#ifdef TANDEM_HAVE_UCX
#include "kv_transfer/ucx/ucx_transport.h"
#endif

namespace tandem {
namespace {

using testing::RequestOutcome;
using testing::TestRouter;

constexpr int kBlock = 16;

node::NodeConfig BaseConfig(const std::string& router) {
  node::NodeConfig c;
  c.router_address = router;
  c.cluster_token = testing::kTestToken;
  c.heartbeat_interval_ms = 100;
  c.reconnect_interval_ms = 100;
  c.transfer_blocks = 64;
  c.late_write_grace_ms = 50;
  c.lease_ms = 5000;
  c.engine = engine::testing::SmallConfig(engine::testing::GoldenDir("llama"));
  c.engine.num_device_blocks = 96;
  return c;
}

std::vector<TokenId> Prompt(int n, int seed) {
  std::vector<TokenId> p(n);
  for (int i = 0; i < n; ++i) p[i] = static_cast<TokenId>(3 + (i * 37 + seed * 11) % 370);
  return p;
}

// `first`'s first two blocks, then a different tail (ceil(52 / 16) = 4 blocks, 2 shared).
std::vector<TokenId> SameFirstTwoBlocks(const std::vector<TokenId>& first) {
  std::vector<TokenId> second(first.begin(), first.begin() + 2 * kBlock);
  std::vector<TokenId> tail = Prompt(kBlock + 4, 99);
  second.insert(second.end(), tail.begin(), tail.end());
  return second;
}

// Test seams: the nodes' backends, and a wrapper around the prefill node's transport.
struct NodeSeams {
  std::function<std::unique_ptr<runtime::Backend>()> prefill_backend, decode_backend;
  std::function<std::unique_ptr<kv_transfer::Transport>(std::unique_ptr<kv_transfer::Transport>)> wrap_transport;
  std::function<std::unique_ptr<kv_transfer::Transport>(std::unique_ptr<kv_transfer::Transport>)> wrap_decode_transport;
};

// `transport` is "local" or "ucx", with "_staged" appended for KV through the host
// arenas (kv_staging: host) instead of pool to pool.
class Cluster {
 public:
  explicit Cluster(std::string transport, std::optional<kv_transfer::FaultConfig> prefill_fault = std::nullopt,
                   NodeSeams seams = {})
      : loop_(2), router_(loop_) {
    const bool staged = transport.ends_with("_staged");
    if (staged) transport.resize(transport.size() - std::string("_staged").size());
    node::NodeConfig dc = BaseConfig(router_.address());
    dc.node_name = "decode-t";
    dc.http_address = "127.0.0.1:0";
    node::NodeConfig pc = BaseConfig(router_.address());
    pc.node_name = "prefill-t";
    dc.kv_staging = pc.kv_staging = staged ? "host" : "auto";
    decode_node::DecodeNodeOptions d;
    d.config = dc;
    d.backend = seams.decode_backend ? seams.decode_backend() : std::make_unique<runtime::CpuBackend>();
    d.make_transport = Factory(transport);
    if (seams.wrap_decode_transport) {
      d.make_transport = [inner = d.make_transport,
                          wrap = seams.wrap_decode_transport]() -> StatusOr<std::unique_ptr<kv_transfer::Transport>> {
        TANDEM_ASSIGN_OR_RETURN(auto t, inner());
        return wrap(std::move(t));
      };
    }
    auto decode = decode_node::DecodeNode::Create(std::move(d));
    TANDEM_CHECK(decode.ok()) << decode.status().ToString();
    decode_ = std::move(*decode);
    prefill_node::PrefillNodeOptions p;
    p.config = pc;
    p.backend = seams.prefill_backend ? seams.prefill_backend() : std::make_unique<runtime::CpuBackend>();
    p.make_transport = Factory(transport);
    if (seams.wrap_transport) {
      p.make_transport = [inner = p.make_transport,
                          wrap = seams.wrap_transport]() -> StatusOr<std::unique_ptr<kv_transfer::Transport>> {
        TANDEM_ASSIGN_OR_RETURN(auto t, inner());
        return wrap(std::move(t));
      };
    }
    if (prefill_fault) {
      p.make_transport = [inner = p.make_transport,
                          fault = *prefill_fault]() -> StatusOr<std::unique_ptr<kv_transfer::Transport>> {
        TANDEM_ASSIGN_OR_RETURN(auto t, inner());
        return std::unique_ptr<kv_transfer::Transport>(
            std::make_unique<kv_transfer::FaultTransport>(std::move(t), fault, Clock::Real()));
      };
    }
    auto prefill = prefill_node::PrefillNode::Create(std::move(p));
    TANDEM_CHECK(prefill.ok()) << prefill.status().ToString();
    prefill_ = std::move(*prefill);
    TANDEM_CHECK(router_.WaitRegistered(proto::NODE_ROLE_DECODE));
    TANDEM_CHECK(router_.WaitRegistered(proto::NODE_ROLE_PREFILL));
    // The router saw Register; the nodes send Tokens only once they have the RegisterReply.
    for (int i = 0; i < 1000 && !(decode_->host().registered() && prefill_->host().registered()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    TANDEM_CHECK(decode_->host().registered() && prefill_->host().registered());
  }
  ~Cluster() {
    prefill_->Stop();
    decode_->Stop();
  }

  std::function<StatusOr<std::unique_ptr<kv_transfer::Transport>>()> Factory(const std::string& transport) {
    if (transport == "local") {
      return [this]() -> StatusOr<std::unique_ptr<kv_transfer::Transport>> {
        return std::unique_ptr<kv_transfer::Transport>(std::make_unique<kv_transfer::LocalTransport>(fabric_));
      };
    }
#ifdef TANDEM_HAVE_UCX
    return []() -> StatusOr<std::unique_ptr<kv_transfer::Transport>> {
      TANDEM_ASSIGN_OR_RETURN(auto t, kv_transfer::UcxTransport::Create(kv_transfer::UcxConfig{.transports = "tcp"}));
      return std::unique_ptr<kv_transfer::Transport>(std::move(t));
    };
#else
    return nullptr;
#endif
  }

  proto::ReserveRequest MakeReserve(uint64_t id, const std::vector<TokenId>& prompt, int max_tokens) {
    proto::ReserveRequest r;
    r.set_request_id(id);
    r.set_epoch(1);
    r.set_prompt_len(static_cast<int>(prompt.size()));
    r.set_max_tokens(max_tokens);
    r.mutable_token_ids()->Add(prompt.begin(), prompt.end());
    r.mutable_sampling()->set_temperature(0);
    r.mutable_sampling()->set_ignore_eos(true);
    r.mutable_sampling()->set_max_tokens(max_tokens);
    r.set_tenant_salt("tenant-a");
    r.set_lease_ms(5000);
    return r;
  }

  proto::PrefillRequest MakePrefill(uint64_t id, const std::vector<TokenId>& prompt, int max_tokens,
                                    const proto::ReserveReply* reservation) {
    proto::PrefillRequest p;
    p.set_request_id(id);
    p.set_epoch(1);
    p.mutable_token_ids()->Add(prompt.begin(), prompt.end());
    p.mutable_sampling()->set_temperature(0);
    p.mutable_sampling()->set_ignore_eos(true);
    p.mutable_sampling()->set_max_tokens(max_tokens);
    p.set_tenant_salt("tenant-a");
    if (reservation) {
      *p.mutable_reservation() = *reservation;
      p.set_decode_address(decode_->address());
    }
    return p;
  }

  // Reserve on decode, Prefill on prefill. Returns the reservation.
  StatusOr<proto::ReserveReply> Start(uint64_t id, const std::vector<TokenId>& prompt, int max_tokens) {
    TANDEM_ASSIGN_OR_RETURN(proto::ReserveReply reply,
                            router_.node(proto::NODE_ROLE_DECODE)
                                ->CallAndWaitFor<proto::ReserveReply>(MakeReserve(id, prompt, max_tokens), 10000));
    if (reply.needed_runs_size() == 0) return reply;
    TANDEM_RETURN_IF_ERROR(router_.node(proto::NODE_ROLE_PREFILL)
                               ->CallAndWaitFor<proto::Ack>(MakePrefill(id, prompt, max_tokens, &reply), 10000)
                               .status());
    return reply;
  }

  // As the router does by default: the PrefillRequest beside the Reserve (reservation
  // follows), then the reservation in a PrefillTarget. `compute_first`: the prefill node
  // has computed the prompt before the reservation reaches it. Returns the reservation.
  StatusOr<proto::ReserveReply> StartWithPrefillFirst(uint64_t id, const std::vector<TokenId>& prompt, int max_tokens,
                                                      bool compute_first) {
    proto::PrefillRequest early = MakePrefill(id, prompt, max_tokens, nullptr);
    early.set_reservation_follows(true);
    early.set_decode_address(decode_->address());
    auto prefill = router_.node(proto::NODE_ROLE_PREFILL);
    const int64_t finished = prefill_->engine().Counters().finished;
    TANDEM_RETURN_IF_ERROR(prefill->CallAndWaitFor<proto::Ack>(early, 10000).status());
    if (compute_first) {
      // Finished (its first token sampled): the whole prompt's KV is ready and waits for a target.
      const int64_t before = finished;
      for (int i = 0; i < 500 && prefill_->engine().Counters().finished == before; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    TANDEM_ASSIGN_OR_RETURN(proto::ReserveReply reply,
                            router_.node(proto::NODE_ROLE_DECODE)
                                ->CallAndWaitFor<proto::ReserveReply>(MakeReserve(id, prompt, max_tokens), 10000));
    proto::PrefillTarget target;
    target.set_request_id(id);
    target.set_epoch(1);
    *target.mutable_reservation() = reply;
    TANDEM_RETURN_IF_ERROR(prefill->CallAndWaitFor<proto::Ack>(target, 10000).status());
    return reply;
  }

  void Cancel(proto::NodeRole role, uint64_t id, Epoch epoch = 1) {
    proto::Cancel c;
    c.set_request_id(id);
    c.set_epoch(epoch);
    c.set_reason("test");
    auto ack = router_.node(role)->CallAndWaitFor<proto::Ack>(c, 10000);
    EXPECT_TRUE(ack.ok()) << ack.status().ToString();
  }

  // Both nodes idle and KV clean (engine counters, transfer state), within timeout.
  bool WaitKvClean(int timeout_ms = 10000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      if (KvClean()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      decode_->engine().Wake();
      prefill_->engine().Wake();
    }
    return KvClean();
  }
  bool KvClean() {
    auto clean = [](const scheduler::SchedulerCounters& c) {
      return c.num_running == 0 && c.num_waiting == 0 && c.num_swapped == 0 && c.reservations_active == 0 &&
             c.kv.device.referenced_blocks == 0 && c.kv.host.referenced_blocks == 0;
    };
    decode_node::DecodeNodeStats d = decode_->Stats();
    prefill_node::PrefillNodeStats p = prefill_->Stats();
    return clean(decode_->engine().Counters()) && clean(prefill_->engine().Counters()) && d.requests == 0 &&
           d.landing_in_use == 0 && d.sessions == 0 && p.requests == 0 && p.staging_in_use == 0 && p.sessions == 0;
  }

  net::EventLoop loop_;
  TestRouter router_;
  kv_transfer::LocalFabric fabric_;
  std::unique_ptr<decode_node::DecodeNode> decode_;
  std::unique_ptr<prefill_node::PrefillNode> prefill_;
};

// The single-process oracle.
std::vector<TokenId> Oracle(const std::vector<TokenId>& prompt, int max_tokens) {
  auto engine = engine::testing::MakeEngine(BaseConfig("").engine);
  engine->Submit(engine::testing::Greedy(1, prompt, max_tokens, "tenant-a"));
  auto results = engine::testing::RunToCompletion(*engine, 1);
  return results[1].tokens;
}

class DisaggTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
#ifndef TANDEM_HAVE_UCX
    if (GetParam().starts_with("ucx")) GTEST_SKIP() << "no UCX in this build";
#endif
  }
};

TEST_P(DisaggTest, GreedyOutputEqualsSingleEngineForBlockBoundaryLengths) {
  Cluster cluster(GetParam());
  // CPU pools are host memory: every transport reaches them unless staging is forced.
  const bool direct = !GetParam().ends_with("_staged");
  EXPECT_EQ(cluster.decode_->direct_landing(), direct);
  EXPECT_EQ(cluster.prefill_->direct_source(), direct);
  const int kMaxTokens = 6;
  uint64_t id = 100;
  for (int len : {1, kBlock - 1, kBlock, kBlock + 1, 5 * kBlock + 3}) {
    SCOPED_TRACE("prompt length " + std::to_string(len));
    std::vector<TokenId> prompt = Prompt(len, len);
    auto reply = cluster.Start(++id, prompt, kMaxTokens);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->prefix_hit_tokens(), 0);
    RequestOutcome out = cluster.router_.Wait(id);
    ASSERT_TRUE(out.finished);
    EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << out.error.ToString();
    EXPECT_EQ(out.terminal_entries, 1);
    EXPECT_EQ(out.tokens.size(), static_cast<size_t>(kMaxTokens));
    EXPECT_EQ(out.tokens, Oracle(prompt, kMaxTokens));
  }
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, ConcurrentRequestsAllMatchTheSingleEngine) {
  Cluster cluster(GetParam());
  const int kMaxTokens = 5;
  std::map<uint64_t, std::vector<TokenId>> prompts;
  for (uint64_t id = 800; id < 810; ++id) {
    prompts[id] = Prompt(1 + static_cast<int>(id % 7) * 9, static_cast<int>(id));
    auto reply = cluster.Start(id, prompts[id], kMaxTokens);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  }
  for (auto& [id, prompt] : prompts) {
    RequestOutcome out = cluster.router_.Wait(id);
    EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << out.error.ToString();
    EXPECT_EQ(out.terminal_entries, 1);
    EXPECT_EQ(out.tokens, Oracle(prompt, kMaxTokens)) << "request " << id;
  }
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, PartialPrefixHitOnDecodeTransfersOnlyTheSuffix) {
  Cluster cluster(GetParam());
  std::vector<TokenId> first = Prompt(3 * kBlock + 5, 7);
  ASSERT_TRUE(cluster.Start(1, first, 4).ok());
  ASSERT_TRUE(cluster.router_.Wait(1).finished);
  // Same first two blocks, different rest: decode has 2 blocks cached.
  const std::vector<TokenId> second = SameFirstTwoBlocks(first);
  uint64_t before = cluster.prefill_->Stats().bytes_sent;
  auto reply = cluster.Start(2, second, 5);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->prefix_hit_tokens(), 2 * kBlock);
  int needed = 0;
  for (const auto& run : reply->needed_runs()) needed += run.num_blocks();
  EXPECT_EQ(needed, 2);  // ceil(52 / 16) = 4 blocks, 2 cached
  RequestOutcome out = cluster.router_.Wait(2);
  EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << out.error.ToString();
  EXPECT_EQ(out.tokens, Oracle(second, 5));
  EXPECT_EQ(out.num_cached_tokens, 2 * kBlock);
  // Independent size: layers x blocks x (2 x kv_heads x block x head_dim x 4 bytes), golden llama.
  const uint64_t block_layer_bytes = 2ull * 2 * kBlock * 16 * 4;
  EXPECT_EQ(cluster.prefill_->Stats().bytes_sent - before, 2ull * 2 * block_layer_bytes);
  EXPECT_TRUE(cluster.WaitKvClean());
}

// The PrefillRequest ahead of the reservation (the router's default): the prompt computes
// while decode reserves, and only what decode's reservation needs leaves the node, whether
// the reservation comes before or after the prompt's KV is ready.
TEST_P(DisaggTest, PrefillBeforeTheReservationMatchesTheSingleEngine) {
  Cluster cluster(GetParam());
  uint64_t id = 200;
  for (bool compute_first : {false, true}) {
    for (int len : {1, kBlock, 3 * kBlock + 5}) {
      SCOPED_TRACE("prompt length " + std::to_string(len) + (compute_first ? ", computed first" : ""));
      std::vector<TokenId> prompt = Prompt(len, len + (compute_first ? 1000 : 0));
      auto reply = cluster.StartWithPrefillFirst(++id, prompt, 5, compute_first);
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      RequestOutcome out = cluster.router_.Wait(id);
      EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << out.error.ToString();
      EXPECT_EQ(out.terminal_entries, 1);
      EXPECT_EQ(out.tokens, Oracle(prompt, 5));
    }
  }
  // Decode holds the first two blocks: the prefill node, which readied all four before it
  // knew, sends the last two.
  std::vector<TokenId> first = Prompt(3 * kBlock + 5, 7);
  ASSERT_TRUE(cluster.Start(1, first, 4).ok());
  ASSERT_TRUE(cluster.router_.Wait(1).finished);
  const std::vector<TokenId> second = SameFirstTwoBlocks(first);
  const uint64_t before = cluster.prefill_->Stats().bytes_sent;
  auto reply = cluster.StartWithPrefillFirst(2, second, 5, /*compute_first=*/true);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->prefix_hit_tokens(), 2 * kBlock);
  RequestOutcome out = cluster.router_.Wait(2);
  EXPECT_EQ(out.tokens, Oracle(second, 5));
  EXPECT_EQ(out.num_cached_tokens, 2 * kBlock);
  const uint64_t block_layer_bytes = 2ull * 2 * kBlock * 16 * 4;  // as in PartialPrefixHit...
  EXPECT_EQ(cluster.prefill_->Stats().bytes_sent - before, 2ull * 2 * block_layer_bytes);
  EXPECT_TRUE(cluster.WaitKvClean());
}

// A PrefillTarget the node cannot use is refused; a request cancelled before its target
// comes leaves nothing behind.
TEST_P(DisaggTest, PrefillTargetsThatCannotBeUsedAreRefused) {
  Cluster cluster(GetParam());
  auto prefill = cluster.router_.node(proto::NODE_ROLE_PREFILL);
  const std::vector<TokenId> prompt = Prompt(2 * kBlock + 3, 5);
  proto::PrefillTarget target;
  target.set_request_id(500);
  target.set_epoch(1);
  target.mutable_reservation()->add_needed_runs()->set_num_blocks(3);
  target.mutable_reservation()->set_transport_descriptor("garbage");
  EXPECT_EQ(prefill->CallAndWaitFor<proto::Ack>(target, 5000).status().code(), StatusCode::kNotFound);
  // Early, then a reservation that does not cover the prompt: refused, and the request ends.
  proto::PrefillRequest early = cluster.MakePrefill(500, prompt, 4, nullptr);
  early.set_reservation_follows(true);
  early.set_decode_address(cluster.decode_->address());
  ASSERT_TRUE(prefill->CallAndWaitFor<proto::Ack>(early, 5000).ok());
  target.mutable_reservation()->mutable_needed_runs(0)->set_num_blocks(2);
  EXPECT_EQ(prefill->CallAndWaitFor<proto::Ack>(target, 5000).status().code(), StatusCode::kInvalidArgument);
  target.mutable_reservation()->mutable_needed_runs(0)->set_num_blocks(3);
  const StatusCode again = prefill->CallAndWaitFor<proto::Ack>(target, 5000).status().code();
  EXPECT_TRUE(again == StatusCode::kNotFound || again == StatusCode::kFailedPrecondition)
      << "the refused request is over (gone, or ending): " << static_cast<int>(again);
  // Early, then cancelled before any reservation; the next epoch's is refused too.
  early.set_request_id(501);
  ASSERT_TRUE(prefill->CallAndWaitFor<proto::Ack>(early, 5000).ok());
  cluster.Cancel(proto::NODE_ROLE_PREFILL, 501);
  target.set_request_id(501);
  EXPECT_FALSE(prefill->CallAndWaitFor<proto::Ack>(target, 5000).ok());
  // A second target for one that has its reservation.
  ASSERT_TRUE(cluster.StartWithPrefillFirst(502, prompt, 3, false).ok());
  EXPECT_EQ(cluster.router_.Wait(502).reason, proto::FINISH_REASON_LENGTH);
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, LocalPathOnDecode) {
  Cluster cluster(GetParam());
  std::vector<TokenId> prompt = Prompt(2 * kBlock + 1, 3);
  auto ack = cluster.router_.node(proto::NODE_ROLE_DECODE)
                 ->CallAndWaitFor<proto::Ack>(cluster.MakePrefill(5, prompt, 7, nullptr), 10000);
  ASSERT_TRUE(ack.ok()) << ack.status().ToString();
  RequestOutcome out = cluster.router_.Wait(5);
  EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.tokens, Oracle(prompt, 7));
  // Fully cached now: Reserve needs nothing, the router releases it.
  auto reply = cluster.router_.node(proto::NODE_ROLE_DECODE)
                   ->CallAndWaitFor<proto::ReserveReply>(cluster.MakeReserve(6, Prompt(2 * kBlock, 3), 3), 10000);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->needed_runs_size(), 0);
  // The router's fully-cached path: Release (epoch 1), then at once a local prefill of the
  // same id with epoch 2; it must wait for the old reservation to end, not be refused.
  cluster.router_.ExpectEpoch(6, 2);
  proto::Release release;
  release.set_request_id(6);
  release.set_epoch(1);
  ASSERT_TRUE(cluster.router_.node(proto::NODE_ROLE_DECODE)->CallAndWaitFor<proto::Ack>(release, 10000).ok());
  proto::PrefillRequest local = cluster.MakePrefill(6, Prompt(2 * kBlock, 3), 3, nullptr);
  local.set_epoch(2);
  auto local_ack = cluster.router_.node(proto::NODE_ROLE_DECODE)->CallAndWaitFor<proto::Ack>(local, 10000);
  ASSERT_TRUE(local_ack.ok()) << local_ack.status().ToString();
  RequestOutcome again = cluster.router_.Wait(6);
  EXPECT_EQ(again.reason, proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(again.terminal_entries, 1);
  EXPECT_EQ(again.num_cached_tokens, 2 * kBlock - kBlock);  // the last full block is recomputed for logits
  EXPECT_EQ(again.tokens, Oracle(Prompt(2 * kBlock, 3), 3));
  // An older or equal epoch of a known id is refused.
  // (A reservation nobody fills stays until its lease: a stable known id.)
  proto::ReserveRequest stale = cluster.MakeReserve(7, Prompt(3 * kBlock, 77), 5);
  ASSERT_TRUE(cluster.router_.node(proto::NODE_ROLE_DECODE)->CallAndWaitFor<proto::ReserveReply>(stale, 10000).ok());
  EXPECT_EQ(
      cluster.router_.node(proto::NODE_ROLE_DECODE)->CallAndWaitFor<proto::ReserveReply>(stale, 10000).status().code(),
      StatusCode::kAlreadyExists);
  cluster.Cancel(proto::NODE_ROLE_DECODE, 7);
  EXPECT_TRUE(cluster.router_.Wait(7).finished);
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, CancelInEveryPhaseEndsOnceAndLeavesKvClean) {
  Cluster cluster(GetParam());
  // Delays after Prefill's Ack: queued (0), prefilling/transferring (short), decoding (after tokens).
  uint64_t id = 200;
  for (int delay_ms : {0, 1, 5, 20, -1}) {
    ++id;
    SCOPED_TRACE("delay " + std::to_string(delay_ms));
    std::vector<TokenId> prompt = Prompt(4 * kBlock + 2, static_cast<int>(id));
    ASSERT_TRUE(cluster.Start(id, prompt, 400).ok());
    if (delay_ms < 0) {
      cluster.router_.WaitTokens(id, 3);
      EXPECT_GE(cluster.router_.Get(id).tokens.size(), 3u);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    cluster.Cancel(proto::NODE_ROLE_PREFILL, id);
    cluster.Cancel(proto::NODE_ROLE_DECODE, id);
    RequestOutcome out = cluster.router_.Wait(id, 10000);
    ASSERT_TRUE(out.finished);
    // The tiny model can decode all 400 tokens within the longer delays on an idle
    // machine: a request that completed before the cancel arrived is fine, once.
    const bool completed = out.reason == proto::FINISH_REASON_LENGTH && out.tokens.size() == 400u;
    EXPECT_TRUE(out.reason == proto::FINISH_REASON_ABORT || out.reason == proto::FINISH_REASON_ERROR ||
                (completed && delay_ms != 0))
        << "reason " << out.reason << " after " << out.tokens.size() << " tokens";
    EXPECT_EQ(out.terminal_entries, 1);
    EXPECT_TRUE(cluster.WaitKvClean()) << "after cancel with delay " << delay_ms;
  }
  // Cancel of an unknown id is acknowledged.
  cluster.Cancel(proto::NODE_ROLE_DECODE, 999999);
}

// The router's Cancel can overtake its request (sent from another thread), or come while
// the request waits behind an older epoch: the node refuses it when it arrives instead
// of running it for nobody.
TEST_P(DisaggTest, CancelBeforeTheRequestArrivesRefusesItThere) {
  Cluster cluster(GetParam());
  auto decode = cluster.router_.node(proto::NODE_ROLE_DECODE);
  auto prefill = cluster.router_.node(proto::NODE_ROLE_PREFILL);
  const std::vector<TokenId> prompt = Prompt(2 * kBlock + 3, 41);
  cluster.Cancel(proto::NODE_ROLE_DECODE, 900);
  EXPECT_EQ(decode->CallAndWaitFor<proto::Ack>(cluster.MakePrefill(900, prompt, 400, nullptr), 10000).status().code(),
            StatusCode::kCancelled);
  EXPECT_EQ(decode->CallAndWaitFor<proto::ReserveReply>(cluster.MakeReserve(900, prompt, 400), 10000).status().code(),
            StatusCode::kCancelled);
  // A newer epoch of the id runs.
  cluster.router_.ExpectEpoch(900, 2);
  proto::PrefillRequest next = cluster.MakePrefill(900, prompt, 4, nullptr);
  next.set_epoch(2);
  ASSERT_TRUE(decode->CallAndWaitFor<proto::Ack>(next, 10000).ok());
  RequestOutcome out = cluster.router_.Wait(900);
  EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << out.error.ToString();
  EXPECT_EQ(out.tokens, Oracle(prompt, 4));

  // A cancel of an epoch newer than the one the node holds: the newer one, when it
  // comes (here after the old one ended), is refused.
  ASSERT_TRUE(decode->CallAndWaitFor<proto::ReserveReply>(cluster.MakeReserve(901, prompt, 400), 10000).ok());
  cluster.Cancel(proto::NODE_ROLE_DECODE, 901, 2);
  cluster.Cancel(proto::NODE_ROLE_DECODE, 901, 1);
  EXPECT_TRUE(cluster.router_.Wait(901).finished);
  proto::PrefillRequest late = cluster.MakePrefill(901, prompt, 400, nullptr);
  late.set_epoch(2);
  EXPECT_EQ(decode->CallAndWaitFor<proto::Ack>(late, 10000).status().code(), StatusCode::kCancelled);

  // The prefill node likewise, for a well-formed reservation.
  cluster.Cancel(proto::NODE_ROLE_PREFILL, 902);
  proto::ReserveReply fake;
  proto::BlockRun* run = fake.add_needed_runs();
  run->set_first_block(0);
  run->set_num_blocks(3);
  fake.set_transport_descriptor("never opened");
  EXPECT_EQ(prefill->CallAndWaitFor<proto::Ack>(cluster.MakePrefill(902, prompt, 400, &fake), 10000).status().code(),
            StatusCode::kCancelled);
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, RouterConnectionDropCancelsEverythingAndNodesReRegister) {
  Cluster cluster(GetParam());
  for (uint64_t id = 300; id < 304; ++id) {
    ASSERT_TRUE(cluster.Start(id, Prompt(3 * kBlock, static_cast<int>(id)), 400).ok());
  }
  cluster.router_.WaitTokens(300, 2);
  auto dropped = std::chrono::steady_clock::now();
  cluster.router_.DropConnections();
  EXPECT_TRUE(cluster.WaitKvClean(1000)) << "nodes must cancel router work within 1 s";
  EXPECT_LE(std::chrono::steady_clock::now() - dropped, std::chrono::milliseconds(1500));
  EXPECT_TRUE(cluster.router_.WaitRegistered(proto::NODE_ROLE_DECODE, 2));
  EXPECT_TRUE(cluster.router_.WaitRegistered(proto::NODE_ROLE_PREFILL, 2));
  // Serving works again after re-registration.
  std::vector<TokenId> prompt = Prompt(kBlock + 3, 1);
  ASSERT_TRUE(cluster.Start(310, prompt, 4).ok());
  EXPECT_EQ(cluster.router_.Wait(310).tokens, Oracle(prompt, 4));
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, BadControlInputGetsErrorsNotCrashes) {
  Cluster cluster(GetParam());
  auto decode = cluster.router_.node(proto::NODE_ROLE_DECODE);
  auto prefill = cluster.router_.node(proto::NODE_ROLE_PREFILL);
  proto::ReserveRequest bad = cluster.MakeReserve(400, {1, 2, 3}, 4);
  bad.set_token_ids(1, 100000);  // out of vocabulary
  EXPECT_EQ(decode->CallAndWaitFor<proto::ReserveReply>(bad, 5000).status().code(), StatusCode::kInvalidArgument);
  bad = cluster.MakeReserve(401, {1, 2, 3}, 4);
  bad.set_prompt_len(7);
  EXPECT_EQ(decode->CallAndWaitFor<proto::ReserveReply>(bad, 5000).status().code(), StatusCode::kInvalidArgument);
  bad = cluster.MakeReserve(402, Prompt(600, 1), 4);  // longer than the model
  EXPECT_EQ(decode->CallAndWaitFor<proto::ReserveReply>(bad, 5000).status().code(), StatusCode::kInvalidArgument);
  bad = cluster.MakeReserve(403, {}, 4);
  EXPECT_FALSE(decode->CallAndWaitFor<proto::ReserveReply>(bad, 5000).ok());
  bad = cluster.MakeReserve(404, {1, 2, 3}, 4);
  bad.mutable_sampling()->set_temperature(-3);
  EXPECT_EQ(decode->CallAndWaitFor<proto::ReserveReply>(bad, 5000).status().code(), StatusCode::kInvalidArgument);
  // Prefill with a reservation that does not cover the prompt, and one without a decode address.
  proto::ReserveReply fake;
  fake.add_needed_runs()->set_num_blocks(9);
  fake.set_transport_descriptor("garbage");
  proto::PrefillRequest p = cluster.MakePrefill(405, Prompt(20, 1), 4, &fake);
  EXPECT_EQ(prefill->CallAndWaitFor<proto::Ack>(p, 5000).status().code(), StatusCode::kInvalidArgument);
  p.clear_decode_address();
  EXPECT_EQ(prefill->CallAndWaitFor<proto::Ack>(p, 5000).status().code(), StatusCode::kInvalidArgument);
  // A well-formed job whose target descriptor is garbage fails cleanly (decode has no such request).
  fake.mutable_needed_runs(0)->set_num_blocks(2);
  proto::PrefillRequest garbage = cluster.MakePrefill(406, Prompt(20, 1), 4, &fake);
  EXPECT_TRUE(prefill->CallAndWaitFor<proto::Ack>(garbage, 5000).ok());
  // Unknown KvDone / wrong epochs are ignored by decode.
  auto reply = cluster.Start(407, Prompt(20, 2), 3);
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(cluster.router_.Wait(407).reason, proto::FINISH_REASON_LENGTH);
  // A message of the wrong class as a request.
  EXPECT_EQ(decode->CallAndWaitFor<proto::Ack>(proto::Heartbeat(), 5000).status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST_P(DisaggTest, MetricsOverHttpShowKvCleanGauges) {
  Cluster cluster(GetParam());
  std::vector<TokenId> prompt = Prompt(2 * kBlock + 3, 5);
  ASSERT_TRUE(cluster.Start(500, prompt, 3).ok());
  ASSERT_TRUE(cluster.router_.Wait(500).finished);
  ASSERT_TRUE(cluster.WaitKvClean());
  std::string http = cluster.decode_->host().http_address();
  auto live = testing::HttpGet(http, "/health/live");
  EXPECT_EQ(live.first, 200);
  EXPECT_EQ(testing::HttpGet(http, "/health/ready").first, 200);
  EXPECT_EQ(testing::HttpGet(http, "/nope").first, 404);
  auto metrics = testing::HttpGet(http, "/metrics");
  ASSERT_EQ(metrics.first, 200);
  const std::string model = "{model_name=\"golden\"}";
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_num_requests_running" + model), 0);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_kv_reservations_active" + model), 0);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_kv_blocks_referenced{model_name=\"golden\",tier=\"gpu\"}"), 0);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_kv_transfer_sessions"), 0);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_kv_transfer_blocks_in_use"), 0);
  EXPECT_GT(testing::MetricValue(metrics.second,
                                 "tandem_kv_transfer_bytes_total{model_name=\"golden\",direction=\"received\"}"),
            0);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_generation_tokens_total" + model), 3);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_request_decode_time_seconds_count" + model), 1);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_kv_transfer_seconds_count" + model), 1);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_kv_handoff_wait_seconds_count" + model), 1);
  EXPECT_EQ(testing::MetricValue(metrics.second,
                                 "tandem_request_queue_time_seconds_count{model_name=\"golden\",stage=\"decode\"}"),
            1);
  // The prompt was prefilled elsewhere: no prefill time here.
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_request_prefill_time_seconds_count" + model), 0);
  EXPECT_EQ(testing::MetricValue(metrics.second, "tandem_node_ready"), 1);
  cluster.decode_->host().BeginDrain();
  EXPECT_EQ(testing::HttpGet(http, "/health/ready").first, 503);
  EXPECT_EQ(testing::HttpGet(http, "/health/live").first, 200);
  auto refused = cluster.router_.node(proto::NODE_ROLE_DECODE)
                     ->CallAndWaitFor<proto::ReserveReply>(cluster.MakeReserve(501, prompt, 3), 5000);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
}

TEST(DisaggFaultTest, CancelWhileTransferringEndsOnceAndLeavesKvClean) {
  kv_transfer::FaultConfig fault;
  fault.delay_ms = 400;  // every layer batch is held: the session stays open for a while
  for (const char* transport : {"local", "local_staged"}) {
    SCOPED_TRACE(transport);
    Cluster cluster(transport, fault);
    ASSERT_TRUE(cluster.Start(600, Prompt(3 * kBlock + 1, 6), 50).ok());
    bool transferring = false;
    for (int i = 0; i < 500 && !transferring; ++i) {
      transferring = cluster.prefill_->Stats().sessions > 0 && cluster.decode_->Stats().sessions > 0;
      if (!transferring) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(transferring);
    EXPECT_GT(cluster.decode_->engine().Counters().reservations_active, 0);
    cluster.Cancel(proto::NODE_ROLE_DECODE, 600);
    cluster.Cancel(proto::NODE_ROLE_PREFILL, 600);
    RequestOutcome out = cluster.router_.Wait(600, 5000);
    ASSERT_TRUE(out.finished);
    EXPECT_TRUE(out.reason == proto::FINISH_REASON_ABORT || out.reason == proto::FINISH_REASON_ERROR);
    EXPECT_EQ(out.terminal_entries, 1);
    EXPECT_TRUE(out.tokens.empty());
    if (std::string(transport) == "local") {
      // Landing straight in the pool: the reservation's blocks sit out the scheduler's quarantine.
      bool quarantined = false;
      for (int i = 0; i < 100 && !quarantined; ++i) {
        cluster.decode_->engine().Wake();
        quarantined = cluster.decode_->engine().Counters().num_quarantined_blocks > 0;
        if (!quarantined) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_TRUE(quarantined);
    }
    EXPECT_TRUE(cluster.WaitKvClean());
  }
}

TEST(DisaggFaultTest, TransferFailuresFailOnlyTheAffectedRequests) {
  kv_transfer::FaultConfig fault;
  // 2 layers = 2 batches per request, posted as each layer is computed. Batch 3 (request 2's
  // first layer) fails; whether request 2 still posts its second layer depends on when the
  // failure is seen, so the batches 6, 9 ... land on requests 4, 6 or 3, 5, 6.
  fault.fail_every_nth = 3;
  Cluster cluster("local", fault);
  int failed = 0, ok = 0;
  for (uint64_t id = 700; id < 706; ++id) {
    std::vector<TokenId> prompt = Prompt(kBlock + 2, static_cast<int>(id));
    ASSERT_TRUE(cluster.Start(id, prompt, 3).ok());
    RequestOutcome out = cluster.router_.Wait(id, 10000);
    ASSERT_TRUE(out.finished);
    EXPECT_EQ(out.terminal_entries, 1);
    if (out.reason == proto::FINISH_REASON_ERROR) {
      ++failed;
      EXPECT_FALSE(out.error.ok());
    } else {
      ++ok;
      EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH);
      EXPECT_EQ(out.tokens, Oracle(prompt, 3));
    }
  }
  EXPECT_GE(failed, 3);
  EXPECT_LE(failed, 4);
  EXPECT_EQ(ok + failed, 6);
  EXPECT_TRUE(cluster.WaitKvClean());
}

// RELIABILITY F5: the prefill -> decode link is cut (new connections refused, posted
// writes never complete): requests end with an error by their lease, nothing hangs and
// KV is clean; once healed, requests succeed with the single-engine output.
TEST(DisaggFaultTest, PartitionEndsRequestsByTheLeaseAndTheLinkRecovers) {
  std::atomic<kv_transfer::FaultTransport*> link{nullptr};
  NodeSeams seams;
  seams.wrap_transport = [&link](std::unique_ptr<kv_transfer::Transport> inner) {
    auto fault =
        std::make_unique<kv_transfer::FaultTransport>(std::move(inner), kv_transfer::FaultConfig{}, Clock::Real());
    link = fault.get();
    return std::unique_ptr<kv_transfer::Transport>(std::move(fault));
  };
  Cluster cluster("local", std::nullopt, seams);
  ASSERT_NE(link.load(), nullptr);
  // A request before the cut opens the connection, so the cut also meets a live peer.
  std::vector<TokenId> first = Prompt(2 * kBlock + 1, 800);
  ASSERT_TRUE(cluster.Start(800, first, 3).ok());
  EXPECT_EQ(cluster.router_.Wait(800, 10000).tokens, Oracle(first, 3));

  link.load()->SetPartitioned(true);
  const auto cut = std::chrono::steady_clock::now();
  for (uint64_t id = 801; id < 804; ++id) {
    ASSERT_TRUE(cluster.Start(id, Prompt(2 * kBlock + 1, static_cast<int>(id)), 3).ok());
  }
  for (uint64_t id = 801; id < 804; ++id) {
    RequestOutcome out = cluster.router_.Wait(id, 15000);
    ASSERT_TRUE(out.finished) << "request " << id << " hangs across the partition";
    EXPECT_EQ(out.reason, proto::FINISH_REASON_ERROR) << "request " << id;
    EXPECT_EQ(out.terminal_entries, 1);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count();
  EXPECT_LT(seconds, 5.0 + 3.0) << "ended later than the 5 s lease";
  EXPECT_TRUE(cluster.WaitKvClean());

  link.load()->SetPartitioned(false);
  for (uint64_t id = 810; id < 813; ++id) {
    std::vector<TokenId> prompt = Prompt(2 * kBlock + 1, static_cast<int>(id));
    ASSERT_TRUE(cluster.Start(id, prompt, 3).ok());
    RequestOutcome out = cluster.router_.Wait(id, 10000);
    EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH) << "request " << id << " after the heal";
    EXPECT_EQ(out.tokens, Oracle(prompt, 3));
  }
  EXPECT_TRUE(cluster.WaitKvClean());
  std::printf("partition: requests ended %.2f s after the cut\n", seconds);
}

// What the layer-streaming test watches: GatherRows calls (a forward makes them
// only after its last layer, to pick the rows for the LM head), and how many
// there had been when the prefill node posted its first KV write.
struct StreamProbe {
  std::atomic<int> gathers{0};
  std::atomic<int> gathers_at_first_post{-1};
};

// CpuBackend whose layers after the first take `layer_delay` each (in RopeKvWrite).
class SlowLayerBackend final : public runtime::Backend {
 public:
  SlowLayerBackend(StreamProbe* probe, std::chrono::milliseconds layer_delay) : probe_(probe), delay_(layer_delay) {}
  runtime::Device device() const override { return cpu_.device(); }
  DType compute_dtype() const override { return cpu_.compute_dtype(); }
  StatusOr<runtime::Buffer> Allocate(DType dtype, const std::vector<int64_t>& shape) override {
    return cpu_.Allocate(dtype, shape);  // the buffers belong to cpu_
  }
  Status CopyToDevice(const void* src, size_t n, runtime::Tensor dst) override {
    return cpu_.CopyToDevice(src, n, dst);
  }
  Status CopyToHost(runtime::Tensor src, void* dst, size_t n) override { return cpu_.CopyToHost(src, dst, n); }
  Status Embedding(runtime::Tensor ids, runtime::Tensor table, runtime::Tensor out) override {
    return cpu_.Embedding(ids, table, out);
  }
  Status RmsNorm(const runtime::RmsNormParams& p) override { return cpu_.RmsNorm(p); }
  Status Linear(const runtime::LinearParams& p) override { return cpu_.Linear(p); }
  Status RopeKvWrite(const runtime::RopeKvWriteParams& p) override {
    if (p.layer > 0) std::this_thread::sleep_for(delay_);
    return cpu_.RopeKvWrite(p);
  }
  Status PagedAttention(const runtime::PagedAttentionParams& p) override { return cpu_.PagedAttention(p); }
  Status SiluAndMul(runtime::Tensor gate_up, runtime::Tensor out) override { return cpu_.SiluAndMul(gate_up, out); }
  Status GatherRows(runtime::Tensor src, runtime::Tensor indices, runtime::Tensor out) override {
    probe_->gathers.fetch_add(1);
    return cpu_.GatherRows(src, indices, out);
  }

 protected:
  void Free(void*) override { TANDEM_CHECK(false) << "SlowLayerBackend owns no buffers"; }

 private:
  runtime::CpuBackend cpu_;
  StreamProbe* probe_;
  std::chrono::milliseconds delay_;
};

// Forwards every call to `inner`; the wrappers below override what they watch.
class ForwardingTransport : public kv_transfer::Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<kv_transfer::Transport> inner) : inner_(std::move(inner)) {}
  kv_transfer::TransportCapabilities Capabilities() const override { return inner_->Capabilities(); }
  std::string WorkerAddress() const override { return inner_->WorkerAddress(); }
  StatusOr<kv_transfer::RegisteredRegion> RegisterMemory(void* addr, size_t length,
                                                         kv_transfer::MemoryKind kind) override {
    return inner_->RegisterMemory(addr, length, kind);
  }
  Status UnregisterMemory(kv_transfer::RegionId region) override { return inner_->UnregisterMemory(region); }
  StatusOr<kv_transfer::PeerId> Connect(std::string_view address) override { return inner_->Connect(address); }
  Status Disconnect(kv_transfer::PeerId peer) override { return inner_->Disconnect(peer); }
  StatusOr<kv_transfer::RemoteRegionId> LoadRemoteRegion(kv_transfer::PeerId peer, std::string_view d) override {
    return inner_->LoadRemoteRegion(peer, d);
  }
  Status UnloadRemoteRegion(kv_transfer::RemoteRegionId remote) override { return inner_->UnloadRemoteRegion(remote); }
  StatusOr<kv_transfer::TransferId> PostWrites(kv_transfer::PeerId peer,
                                               std::span<const kv_transfer::WriteOp> ops) override {
    return inner_->PostWrites(peer, ops);
  }
  StatusOr<kv_transfer::TransferId> PostReceives(kv_transfer::PeerId peer,
                                                 std::span<const kv_transfer::WriteOp> ops) override {
    return inner_->PostReceives(peer, ops);
  }
  void Cancel(kv_transfer::TransferId id) override { inner_->Cancel(id); }
  size_t Poll(std::vector<kv_transfer::TransferEvent>* events) override { return inner_->Poll(events); }

 private:
  std::unique_ptr<kv_transfer::Transport> inner_;
};

// Notes the probe's gather count at the first PostWrites.
class PostProbeTransport final : public ForwardingTransport {
 public:
  PostProbeTransport(std::unique_ptr<kv_transfer::Transport> inner, StreamProbe* probe)
      : ForwardingTransport(std::move(inner)), probe_(probe) {}
  StatusOr<kv_transfer::TransferId> PostWrites(kv_transfer::PeerId peer,
                                               std::span<const kv_transfer::WriteOp> ops) override {
    int unset = -1;
    probe_->gathers_at_first_post.compare_exchange_strong(unset, probe_->gathers.load());
    return ForwardingTransport::PostWrites(peer, ops);
  }

 private:
  StreamProbe* probe_;
};

// Once armed, the next WorkerAddress (KvReceiver::Open on the decode node's poll
// thread) waits until released.
class GatedOpenTransport final : public ForwardingTransport {
 public:
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool armed = false, entered = false, released = false;
  };
  GatedOpenTransport(std::unique_ptr<kv_transfer::Transport> inner, std::shared_ptr<Gate> gate)
      : ForwardingTransport(std::move(inner)), gate_(std::move(gate)) {}
  std::string WorkerAddress() const override {
    std::unique_lock<std::mutex> lock(gate_->mu);
    if (gate_->armed && !gate_->entered) {
      gate_->entered = true;
      gate_->cv.notify_all();
      gate_->cv.wait_for(lock, std::chrono::seconds(10), [&] { return gate_->released; });
    }
    return ForwardingTransport::WorkerAddress();
  }

 private:
  std::shared_ptr<Gate> gate_;
};

// The router connection drops while the decode node's poll thread opens a request's KV
// session: the request is gone when the open returns, and the session is cancelled. That
// cancel tells the sender through the receiver's sink, which takes the node's lock: it
// once ran under that lock and deadlocked the node (found under load by node_loss_e2e_test:
// the node's router connection stalled, the router declared it dead, it never noticed).
TEST(DisaggFaultTest, RequestEndingWhileItsSessionOpensLeavesTheNodeServing) {
  auto gate = std::make_shared<GatedOpenTransport::Gate>();
  NodeSeams seams;
  seams.wrap_decode_transport = [gate](std::unique_ptr<kv_transfer::Transport> inner) {
    return std::unique_ptr<kv_transfer::Transport>(std::make_unique<GatedOpenTransport>(std::move(inner), gate));
  };
  Cluster cluster("local", std::nullopt, seams);
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->armed = true;
  }
  // The Reserve is answered once the session is open: it ends with the dropped connection.
  std::thread reserve([&] { cluster.Start(700, Prompt(3 * kBlock + 1, 7), 20).status().IgnoreError(); });
  bool entered = false;
  {
    std::unique_lock<std::mutex> lock(gate->mu);
    entered = gate->cv.wait_for(lock, std::chrono::seconds(10), [&] { return gate->entered; });
  }
  if (entered) {
    cluster.router_.DropConnections();  // the node cancels every router request
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->released = true;
  }
  gate->cv.notify_all();
  reserve.join();
  ASSERT_TRUE(entered);
  EXPECT_TRUE(cluster.WaitKvClean(2000));
  ASSERT_TRUE(cluster.router_.WaitRegistered(proto::NODE_ROLE_DECODE, 2));
  ASSERT_TRUE(cluster.router_.WaitRegistered(proto::NODE_ROLE_PREFILL, 2));
  std::vector<TokenId> prompt = Prompt(kBlock + 3, 2);
  ASSERT_TRUE(cluster.Start(701, prompt, 4).ok());
  RequestOutcome out = cluster.router_.Wait(701, 5000);
  ASSERT_TRUE(out.finished) << "the decode node stopped serving";
  EXPECT_EQ(out.tokens, Oracle(prompt, 4));
  EXPECT_TRUE(cluster.WaitKvClean());
}

TEST(DisaggStreamTest, FirstLayerLeavesWhileLaterLayersCompute) {
  // Layer 1 takes 300 ms, so layer 0's KV must be on the wire before the forward
  // reaches its logits; sending after the forward (the old behaviour) fails this.
  StreamProbe probe;
  NodeSeams seams;
  seams.prefill_backend = [&probe] {
    return std::make_unique<SlowLayerBackend>(&probe, std::chrono::milliseconds(300));
  };
  seams.wrap_transport = [&probe](std::unique_ptr<kv_transfer::Transport> inner) {
    return std::unique_ptr<kv_transfer::Transport>(std::make_unique<PostProbeTransport>(std::move(inner), &probe));
  };
  Cluster cluster("local", std::nullopt, seams);
  const std::vector<TokenId> prompt = Prompt(3 * kBlock + 5, 9);
  ASSERT_TRUE(cluster.Start(800, prompt, 4).ok());
  RequestOutcome out = cluster.router_.Wait(800, 10000);
  ASSERT_TRUE(out.finished);
  EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.tokens, Oracle(prompt, 4));
  EXPECT_GT(probe.gathers.load(), 0);
  EXPECT_EQ(probe.gathers_at_first_post.load(), 0);
  EXPECT_TRUE(cluster.WaitKvClean());
}

std::unique_ptr<runtime::Backend> CudaOrNull() {
  StatusOr<std::unique_ptr<runtime::Backend>> b = engine::MakeBackend("cuda", 0);
  return b.ok() ? std::move(*b) : nullptr;
}

TEST(DisaggCudaTest, LayerStreamedKvFromTheGpuMatchesOneGpuEngine) {
  // Both nodes on the CUDA backend: the prefill node's layer copies go through the
  // CUDA HostCopyQueue (copy stream, event fences) into pinned staging.
  if (!CudaOrNull()) GTEST_SKIP() << "no CUDA backend or GPU here: skipping the GPU disaggregation test";
  NodeSeams seams;
  seams.prefill_backend = CudaOrNull;
  seams.decode_backend = CudaOrNull;
  Cluster cluster("local", std::nullopt, seams);
  engine::EngineConfig oracle_config = BaseConfig("").engine;
  auto oracle = engine::Engine::Create(oracle_config, CudaOrNull());
  ASSERT_TRUE(oracle.ok()) << oracle.status().ToString();
  uint64_t id = 900;
  for (int len : {1, kBlock - 1, kBlock, kBlock + 1, 4 * kBlock + 6}) {
    const std::vector<TokenId> prompt = Prompt(len, len);
    (*oracle)->Submit(engine::testing::Greedy(id, prompt, 6, "tenant-a"));
    auto expected = engine::testing::RunToCompletion(**oracle, 1);
    ASSERT_TRUE(cluster.Start(id, prompt, 6).ok());
    RequestOutcome out = cluster.router_.Wait(id, 20000);
    ASSERT_TRUE(out.finished) << "prompt length " << len;
    EXPECT_EQ(out.reason, proto::FINISH_REASON_LENGTH);
    EXPECT_EQ(out.tokens, expected[id].tokens) << "prompt length " << len;
    ++id;
  }
  EXPECT_TRUE(cluster.WaitKvClean());
}

INSTANTIATE_TEST_SUITE_P(Transports, DisaggTest, ::testing::Values("local", "ucx", "local_staged", "ucx_staged"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem
