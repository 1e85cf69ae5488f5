// tandem-ctl's text: the node table, the drain sentence, the readiness verdict
// and error messages from the router's JSON; wrong shapes print without a throw.
#include "tools/ctl/ctl_format.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace tandem::ctl {
namespace {

using nlohmann::json;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(CtlFormatTest, NodesTableHasARowPerNodeInAlignedColumns) {
  const json reply = json::parse(R"json({"nodes": [
    {"id": 1, "name": "d1", "role": "decode", "address": "127.0.0.1:7101", "state": "ready", "avoided": false,
     "load": {"router_requests": 3, "running": 2, "waiting": 1},
     "kv": {"gpu_used_blocks": 40, "gpu_total_blocks": 512, "host_used_blocks": 0, "host_total_blocks": 0,
            "cached_blocks": 12},
     "version": "0.1.0", "protocol_version": 1, "last_heartbeat_ms": 120},
    {"id": 2, "name": "prefill-long-name", "role": "prefill", "address": "10.0.0.2:7201", "state": "dead",
     "load": {}, "kv": {}, "version": "", "protocol_version": 0, "last_heartbeat_ms": null,
     "dead_reason": "connection closed (while draining)", "dead_ms": 65000}]})json");
  const std::vector<std::string> lines = Lines(NodesTable(reply));
  ASSERT_EQ(lines.size(), 3u) << NodesTable(reply);
  EXPECT_EQ(lines[0].rfind("ID  NAME", 0), 0u) << lines[0];
  const size_t state_column = lines[0].find("STATE");
  EXPECT_EQ(lines[1].substr(state_column, 5), "ready") << NodesTable(reply);
  EXPECT_EQ(lines[2].substr(state_column, 4), "dead");
  EXPECT_NE(lines[1].find("40/512"), std::string::npos);
  EXPECT_NE(lines[1].find("0.1.0/p1"), std::string::npos);
  EXPECT_NE(lines[1].find("120ms"), std::string::npos);
  EXPECT_NE(lines[1].back(), ' ') << "padding after the last column";
  EXPECT_NE(lines[2].find("dead 1m05s ago: connection closed (while draining)"), std::string::npos) << lines[2];
  EXPECT_EQ(NodesTable(json::parse(R"({"nodes": []})")), "no nodes registered\n");
}

TEST(CtlFormatTest, DrainAndReadinessSayWhatHappened) {
  const json drained = json::parse(
      R"({"node": {"id": 4, "name": "d2", "role": "decode", "address": "127.0.0.1:7102", "state": "draining"}})");
  EXPECT_EQ(DrainText(drained),
            "node 4 ('d2', decode, 127.0.0.1:7102) is draining: it gets no new work and exits once its requests "
            "finish\n");
  const json ready = json::parse(R"({"ready": false, "serving": true, "mode": "disaggregated",
    "missing": ["prefill"], "message": "no ready prefill node",
    "pools": {"decode": {"required": true, "ready": 2, "draining": 1},
              "prefill": {"required": true, "ready": 0, "draining": 0}}})");
  const std::vector<std::string> lines = Lines(ReadinessText(ready));
  ASSERT_EQ(lines.size(), 4u) << ReadinessText(ready);
  EXPECT_EQ(lines[0], "cluster: NOT READY (no ready prefill node); serving: yes; mode: disaggregated");
  EXPECT_EQ(lines[1], "POOL     REQUIRED  READY  DRAINING");
  EXPECT_EQ(lines[2], "decode   yes       2      1");
  EXPECT_EQ(lines[3], "prefill  yes       0      0");
}

TEST(CtlFormatTest, WrongShapesPrintWithoutThrowing) {
  for (const char* text : {"null", "[]", "42", R"({"nodes": 3})", R"({"nodes": [1, "x", null, {"load": 5}]})",
                           R"({"node": "d1"})", R"({"pools": []})"}) {
    SCOPED_TRACE(text);
    const json reply = json::parse(text);
    EXPECT_FALSE(NodesTable(reply).empty());
    EXPECT_FALSE(DrainText(reply).empty());
    EXPECT_FALSE(ReadinessText(reply).empty());
  }
  EXPECT_EQ(ErrorMessage(R"({"error": {"message": "invalid or missing admin key", "code": "x"}})"),
            "invalid or missing admin key");
  EXPECT_EQ(ErrorMessage("not json"), "not json");
  EXPECT_EQ(ErrorMessage(std::string(1000, 'x')).size(), 300u);
}

}  // namespace
}  // namespace tandem::ctl
