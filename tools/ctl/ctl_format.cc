#include "tools/ctl/ctl_format.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace tandem::ctl {
namespace {

using nlohmann::json;

// A member as text: strings as they are, numbers as numbers, anything else "-".
std::string Text(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return "-";
  const json& value = object[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  return "-";
}

int64_t Number(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number_integer()) return 0;
  return object[key].get<int64_t>();
}

const json& Member(const json& object, const char* key) {
  static const json kNull;
  return object.is_object() && object.contains(key) ? object[key] : kNull;
}

// Milliseconds as "850ms", "12.3s", "4m05s".
std::string Age(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number_integer()) return "-";
  const int64_t ms = object[key].get<int64_t>();
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ms) / 1000);
  } else {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  }
  return buf;
}

// Rows as left-aligned columns two spaces apart, the first row the header.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);  // an empty last column leaves no padding
    out += line + "\n";
  }
  return out;
}

std::string Blocks(const json& kv, const char* used, const char* total) {
  return std::to_string(Number(kv, used)) + "/" + std::to_string(Number(kv, total));
}

}  // namespace

std::string NodesTable(const json& reply) {
  const json& nodes = Member(reply, "nodes");
  if (!nodes.is_array()) return "unexpected answer: " + reply.dump().substr(0, 300) + "\n";
  if (nodes.empty()) return "no nodes registered\n";
  std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "ROLE", "STATE", "ADDRESS", "REQS", "RUN", "WAIT",
                                                 "KV_GPU", "KV_HOST", "CACHED", "VERSION", "HEARTBEAT", "NOTE"}};
  for (const json& node : nodes) {
    const json& load = Member(node, "load");
    const json& kv = Member(node, "kv");
    std::string note;
    if (Text(node, "state") == "dead") note = "dead " + Age(node, "dead_ms") + " ago: " + Text(node, "dead_reason");
    if (Member(node, "avoided").is_boolean() && node["avoided"].get<bool>()) note = "avoided (refused or timed out)";
    rows.push_back({Text(node, "id"), Text(node, "name"), Text(node, "role"), Text(node, "state"),
                    Text(node, "address"), Text(load, "router_requests"), Text(load, "running"), Text(load, "waiting"),
                    Blocks(kv, "gpu_used_blocks", "gpu_total_blocks"),
                    Blocks(kv, "host_used_blocks", "host_total_blocks"), Text(kv, "cached_blocks"),
                    Text(node, "version") + "/p" + Text(node, "protocol_version"), Age(node, "last_heartbeat_ms"),
                    note});
  }
  return Table(rows);
}

std::string DrainText(const json& reply) {
  const json& node = Member(reply, "node");
  return "node " + Text(node, "id") + " ('" + Text(node, "name") + "', " + Text(node, "role") + ", " +
         Text(node, "address") + ") is " + Text(node, "state") +
         ": it gets no new work and exits once its requests finish\n";
}

std::string ReadinessText(const json& reply) {
  const bool ready = Member(reply, "ready").is_boolean() && reply["ready"].get<bool>();
  std::string out = std::string("cluster: ") + (ready ? "ready" : "NOT READY (" + Text(reply, "message") + ")") +
                    "; serving: " + Text(reply, "serving") + "; mode: " + Text(reply, "mode") + "\n";
  std::vector<std::vector<std::string>> rows = {{"POOL", "REQUIRED", "READY", "DRAINING"}};
  const json& pools = Member(reply, "pools");
  if (pools.is_object()) {
    for (const auto& [name, pool] : pools.items()) {
      rows.push_back({name, Text(pool, "required"), Text(pool, "ready"), Text(pool, "draining")});
    }
  }
  return out + Table(rows);
}

std::string ErrorMessage(const std::string& body) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json& error = Member(parsed, "error");
  if (Member(error, "message").is_string()) return error["message"].get<std::string>();
  return body.substr(0, 300);
}

}  // namespace tandem::ctl
