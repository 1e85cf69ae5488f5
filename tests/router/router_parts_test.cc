// Unit tests of the socket-free parts: config, API keys, admission, SSE framing.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>

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

TEST(ApiKeyTableTest, MatchesExactKeysOnly) {
  ApiKeyTable table({{"sk-alpha-0001", "alpha"}, {"sk-beta-00002", "beta"}});
  EXPECT_FALSE(table.open());
  EXPECT_EQ(table.Authenticate("Bearer sk-alpha-0001"), "alpha");
  EXPECT_EQ(table.Authenticate("Bearer sk-beta-00002"), "beta");
  EXPECT_EQ(table.Authenticate("bearer sk-beta-00002 "), "beta");
  EXPECT_EQ(table.Authenticate("Bearer sk-alpha-000"), std::nullopt);
  EXPECT_EQ(table.Authenticate("Bearer sk-alpha-00011"), std::nullopt);
  EXPECT_EQ(table.Authenticate("sk-alpha-0001"), std::nullopt);
  EXPECT_EQ(table.Authenticate("Basic sk-alpha-0001"), std::nullopt);
  EXPECT_EQ(table.Authenticate(""), std::nullopt);
  EXPECT_EQ(ApiKeyTable({}).Authenticate(""), "default");
}

TEST(AdmissionControllerTest, RunsQueuesRejectsAndHandsOver) {
  AdmissionController admission(2, 1);
  AdmissionController::Ticket ticket = 0;
  int admitted_later = 0;
  auto on_admitted = [&] { ++admitted_later; };
  EXPECT_EQ(admission.Acquire(on_admitted, &ticket), AdmissionController::Outcome::kAdmitted);
  EXPECT_EQ(admission.Acquire(on_admitted, &ticket), AdmissionController::Outcome::kAdmitted);
  EXPECT_EQ(admission.Acquire(on_admitted, &ticket), AdmissionController::Outcome::kQueued);
  AdmissionController::Ticket other = 0;
  EXPECT_EQ(admission.Acquire(on_admitted, &other), AdmissionController::Outcome::kRejected);
  EXPECT_EQ(admission.queued(), 1);
  admission.Release();  // hands the slot to the waiter
  EXPECT_EQ(admitted_later, 1);
  EXPECT_EQ(admission.running(), 2);
  EXPECT_FALSE(admission.CancelQueued(ticket));
  EXPECT_EQ(admission.Acquire(on_admitted, &ticket), AdmissionController::Outcome::kQueued);
  EXPECT_TRUE(admission.CancelQueued(ticket));
  admission.Release();
  admission.Release();
  EXPECT_EQ(admission.running(), 0);
  EXPECT_EQ(admitted_later, 1);
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
