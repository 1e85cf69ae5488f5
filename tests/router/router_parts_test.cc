// Unit tests of the socket-free parts: config, API keys, admission, SSE framing.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "router/admission_controller.h"
#include "router/api_key_table.h"
#include "router/router_config.h"
#include "router/sse_writer.h"
#include "router/utf8_stream.h"

namespace tandem::router {
namespace {

TEST(RouterConfigTest, DefaultsAreValidAndLoopback) {
  RouterConfig config;
  EXPECT_TRUE(config.Validate().ok());
  EXPECT_EQ(config.listen_host, "127.0.0.1");
  EXPECT_EQ(config.listen_port, 8000);
}

// RouterConfig from YAML text through its ConfigBinder, then Validate.
StatusOr<RouterConfig> ParseRouterConfigYaml(const std::string& yaml) {
  TANDEM_ASSIGN_OR_RETURN(RouterConfig config, config::FromYaml<RouterConfig>(yaml));
  TANDEM_RETURN_IF_ERROR(config.Validate());
  return config;
}

TEST(RouterConfigTest, ParsesYaml) {
  StatusOr<RouterConfig> config = ParseRouterConfigYaml(R"(
listen_host: 0.0.0.0
listen_port: 9000
max_concurrent_requests: 8
api_keys:
  - {key: "sk-test-0001", tenant: team-a}
  - {key: "sk-test-0002", tenant: team-b}
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen_host, "0.0.0.0");
  EXPECT_EQ(config->listen_port, 9000);
  EXPECT_EQ(config->max_concurrent_requests, 8);
  ASSERT_EQ(config->api_keys.size(), 2u);
  EXPECT_EQ(config->api_keys[1].tenant, "team-b");
}

TEST(RouterConfigTest, RejectsBadFiles) {
  EXPECT_FALSE(ParseRouterConfigYaml("listen_prot: 1").ok());  // typo
  EXPECT_FALSE(ParseRouterConfigYaml("max_n: 0").ok());
  EXPECT_FALSE(ParseRouterConfigYaml("max_n: [1, 2]").ok());
  EXPECT_FALSE(ParseRouterConfigYaml("listen_port: 70000").ok());
  EXPECT_FALSE(ParseRouterConfigYaml("- a\n- b").ok());
  EXPECT_FALSE(ParseRouterConfigYaml("{unterminated").ok());
  Status dup =
      ParseRouterConfigYaml("api_keys: [{key: secret-key-1, tenant: a}, {key: secret-key-1, tenant: b}]").status();
  EXPECT_FALSE(dup.ok());
  EXPECT_EQ(dup.message().find("secret-key-1"), std::string::npos) << "a key leaked";
  Status no_tenant = ParseRouterConfigYaml("api_keys: [{key: secret-key-2}]").status();
  EXPECT_NE(no_tenant.message().find("lacks 'tenant'"), std::string::npos) << no_tenant.ToString();
  EXPECT_EQ(no_tenant.message().find("secret-key-2"), std::string::npos) << "a key leaked";
  EXPECT_FALSE(ParseRouterConfigYaml("api_keys: sk-0123456789").ok());
}

// The tenant of the key a header authenticates, or nullopt.
std::optional<std::string> TenantOf(const ApiKeyTable& table, std::string_view header) {
  std::optional<ApiKeyGrant> grant = table.Authenticate(header);
  return grant ? std::optional<std::string>(grant->tenant) : std::nullopt;
}

TEST(ApiKeyTableTest, MatchesExactKeysOnly) {
  ApiKeyTable table({{"sk-alpha-0001", "alpha"}, {"sk-beta-00002", "beta"}});
  EXPECT_FALSE(table.open());
  EXPECT_EQ(TenantOf(table, "Bearer sk-alpha-0001"), "alpha");
  EXPECT_EQ(TenantOf(table, "Bearer sk-beta-00002"), "beta");
  EXPECT_EQ(TenantOf(table, "bearer sk-beta-00002 "), "beta");
  EXPECT_EQ(TenantOf(table, "Bearer sk-alpha-000"), std::nullopt);
  EXPECT_EQ(TenantOf(table, "Bearer sk-alpha-00011"), std::nullopt);
  EXPECT_EQ(TenantOf(table, "sk-alpha-0001"), std::nullopt);
  EXPECT_EQ(TenantOf(table, "Basic sk-alpha-0001"), std::nullopt);
  EXPECT_EQ(TenantOf(table, ""), std::nullopt);
  EXPECT_EQ(TenantOf(ApiKeyTable({}), ""), "default");
}

// A key's priority is the default of requests without one; the request's own
// wins, except that min_priority caps how urgent either may be.
TEST(ApiKeyTableTest, KeyPriorityIsTheDefaultAndMinPriorityCapsIt) {
  StatusOr<RouterConfig> config = ParseRouterConfigYaml(R"(
api_keys:
  - {key: sk-plain-0001, tenant: a}
  - {key: sk-batch-0002, tenant: b, priority: 5}
  - {key: sk-capped-003, tenant: c, priority: "3", min_priority: 1}
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ApiKeyTable table(config->api_keys);
  std::optional<ApiKeyGrant> plain = table.Authenticate("Bearer sk-plain-0001");
  std::optional<ApiKeyGrant> batch = table.Authenticate("Bearer sk-batch-0002");
  std::optional<ApiKeyGrant> capped = table.Authenticate("Bearer sk-capped-003");
  ASSERT_TRUE(plain && batch && capped);
  EXPECT_EQ(plain->PriorityFor(std::nullopt), 0);
  EXPECT_EQ(plain->PriorityFor(-7), -7);
  EXPECT_EQ(batch->PriorityFor(std::nullopt), 5);
  EXPECT_EQ(batch->PriorityFor(0), 0) << "the request's own priority wins over the key's default";
  EXPECT_EQ(capped->PriorityFor(std::nullopt), 3);
  EXPECT_EQ(capped->PriorityFor(0), 1) << "raised to min_priority";
  EXPECT_EQ(capped->PriorityFor(-100), 1);
  EXPECT_EQ(capped->PriorityFor(9), 9);
  EXPECT_EQ(PriorityClassOf(capped->PriorityFor(-100)), PriorityClass::kBatch);
  EXPECT_EQ(ApiKeyTable({}).Authenticate("")->PriorityFor(std::nullopt), 0);

  for (const char* bad : {"priority: x", "priority: 1.5", "priority: 3000000000", "min_priority: '1 '"}) {
    Status st = ParseRouterConfigYaml(std::string("api_keys: [{key: sk-bad-00001, tenant: t, ") + bad + "}]").status();
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("api_keys[0]."), std::string::npos) << st.ToString();
    EXPECT_EQ(st.message().find("sk-bad-00001"), std::string::npos) << "a key leaked";
  }
  Status unknown = ParseRouterConfigYaml("api_keys: [{key: sk-bad-00001, tenant: t, priorty: 1}]").status();
  EXPECT_NE(unknown.message().find("unknown key 'priorty'"), std::string::npos) << unknown.ToString();
}

TEST(PriorityClassTest, LowerIsMoreUrgent) {
  EXPECT_EQ(PriorityClassOf(kMinPriority), PriorityClass::kInteractive);
  EXPECT_EQ(PriorityClassOf(-1), PriorityClass::kInteractive);
  EXPECT_EQ(PriorityClassOf(0), PriorityClass::kInteractive);
  EXPECT_EQ(PriorityClassOf(1), PriorityClass::kBatch);
  EXPECT_EQ(PriorityClassOf(kMaxPriority), PriorityClass::kBatch);
}

TEST(AdmissionControllerTest, RunsQueuesRejectsAndHandsOver) {
  constexpr PriorityClass kI = PriorityClass::kInteractive;
  AdmissionController admission(2, 1);
  AdmissionController::Ticket ticket = 0;
  int admitted_later = 0;
  auto on_admitted = [&] { ++admitted_later; };
  EXPECT_EQ(admission.Acquire(kI, on_admitted, &ticket), AdmissionController::Outcome::kAdmitted);
  EXPECT_EQ(admission.Acquire(kI, on_admitted, &ticket), AdmissionController::Outcome::kAdmitted);
  EXPECT_EQ(admission.Acquire(kI, on_admitted, &ticket), AdmissionController::Outcome::kQueued);
  AdmissionController::Ticket other = 0;
  EXPECT_EQ(admission.Acquire(kI, on_admitted, &other), AdmissionController::Outcome::kRejected);
  EXPECT_EQ(admission.queued(), 1);
  admission.Release();  // hands the slot to the waiter
  EXPECT_EQ(admitted_later, 1);
  EXPECT_EQ(admission.running(), 2);
  EXPECT_FALSE(admission.CancelQueued(ticket));
  EXPECT_EQ(admission.Acquire(kI, on_admitted, &ticket), AdmissionController::Outcome::kQueued);
  EXPECT_TRUE(admission.CancelQueued(ticket));
  admission.Release();
  admission.Release();
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(admitted_later, 1);
}

// Counts published under the controller's lock end at the last counts, however the
// threads interleave: the router's running / waiting gauges once stayed at a stale
// snapshot (taken, then set after later calls had set theirs) with every call gone.
TEST(AdmissionControllerTest, PublishedCountsEndAtTheLastCounts) {
  AdmissionController admission(8, 64);
  std::atomic<int32_t> running_gauge{-1}, queued_gauge{-1};
  auto publish = [&] {
    admission.Publish([&](int32_t running, int32_t queued) {
      running_gauge.store(running);
      queued_gauge.store(queued);
    });
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        AdmissionController::Ticket ticket = 0;
        if (admission.Acquire(PriorityClass::kInteractive, [] {}, &ticket) ==
            AdmissionController::Outcome::kAdmitted) {
          publish();
          admission.Release();
        }
        publish();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(running_gauge.load(), 0);
  EXPECT_EQ(queued_gauge.load(), 0);
}

// Freed slots go to interactive waiters first, then batch, each class in arrival
// order; max_queued counts the waiters of both classes.
TEST(AdmissionControllerTest, InteractiveWaitersGoBeforeBatchWaiters) {
  AdmissionController admission(1, 4);
  std::vector<std::string> order;
  auto waiter = [&](std::string name) { return [&order, name] { order.push_back(name); }; };
  AdmissionController::Ticket t = 0, cancelled = 0;
  ASSERT_EQ(admission.Acquire(PriorityClass::kBatch, waiter("-"), &t), AdmissionController::Outcome::kAdmitted);
  ASSERT_EQ(admission.Acquire(PriorityClass::kBatch, waiter("b1"), &t), AdmissionController::Outcome::kQueued);
  ASSERT_EQ(admission.Acquire(PriorityClass::kBatch, waiter("b2"), &t), AdmissionController::Outcome::kQueued);
  ASSERT_EQ(admission.Acquire(PriorityClass::kInteractive, waiter("i1"), &cancelled),
            AdmissionController::Outcome::kQueued);
  ASSERT_EQ(admission.Acquire(PriorityClass::kInteractive, waiter("i2"), &t), AdmissionController::Outcome::kQueued);
  EXPECT_EQ(admission.Acquire(PriorityClass::kInteractive, waiter("x"), &t), AdmissionController::Outcome::kRejected);
  EXPECT_TRUE(admission.CancelQueued(cancelled));
  EXPECT_EQ(admission.queued(), 3);
  ASSERT_EQ(admission.Acquire(PriorityClass::kInteractive, waiter("i3"), &t), AdmissionController::Outcome::kQueued);
  for (int i = 0; i < 4; ++i) admission.Release();
  EXPECT_EQ(order, (std::vector<std::string>{"i2", "i3", "b1", "b2"}));
  EXPECT_EQ(admission.running(), 1);
  EXPECT_EQ(admission.queued(), 0);
  admission.Release();
  EXPECT_EQ(admission.running(), 0);
}

TEST(SseWriterTest, FramesArbitraryBytesSafely) {
  EXPECT_EQ(SseDataEvent("abc"), "data: abc\n\n");
  EXPECT_EQ(SseDataEvent("a\nb\r\nc\rd"), "data: a\ndata: b\ndata: c\ndata: d\n\n");
  const std::string event = SseDataEvent("x\xFFy");
  EXPECT_TRUE(IsValidUtf8(event));
  EXPECT_EQ(event, "data: x\xEF\xBF\xBDy\n\n");
  EXPECT_EQ(SseJsonEvent({{"text", "a\nb"}}), "data: {\"text\":\"a\\nb\"}\n\n");
}

}  // namespace
}  // namespace tandem::router
