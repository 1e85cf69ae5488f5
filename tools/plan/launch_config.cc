#include "tools/plan/launch_config.h"

#include "common/config/config_binder.h"

namespace tandem::tools {
namespace {

std::vector<std::pair<std::string, std::string>> NodeSettings(const std::string& role, const planner::Profile& p,
                                                              const planner::TransferPath& path) {
  const planner::EngineSettings& e = p.engine;
  std::vector<std::pair<std::string, std::string>> s = {{"role", role}, {"backend", p.device.backend}};
  if (!p.model.id.empty()) s.push_back({"model_name", p.model.id});
  if (role != "colocated") {
    // "local" is the in-process memcpy transport; between processes the nodes use ucx.
    s.push_back({"transport", path.transport == "local" ? "ucx" : path.transport});
    if (path.transport == "ucx" && !path.options.empty()) s.push_back({"ucx_transports", path.options});
  }
  s.push_back({"kv.block_size", std::to_string(e.block_size)});
  s.push_back({"kv.num_device_blocks", std::to_string(e.num_device_blocks)});
  s.push_back({"kv.num_host_blocks", std::to_string(e.num_host_blocks)});
  s.push_back({"kv.enable_prefix_caching", e.enable_prefix_caching ? "true" : "false"});
  s.push_back({"scheduler.max_num_batched_tokens", std::to_string(e.max_num_batched_tokens)});
  s.push_back({"scheduler.max_num_seqs", std::to_string(e.max_num_seqs)});
  s.push_back({"scheduler.max_prefill_chunk_tokens", std::to_string(e.max_prefill_chunk_tokens)});
  s.push_back({"scheduler.max_model_len", std::to_string(e.max_model_len)});
  return s;
}

}  // namespace

std::vector<LaunchGroup> LaunchGroups(const planner::Layout& layout, const planner::Profile& prefill,
                                      const planner::Profile& decode, const planner::TransferPath& transport) {
  std::vector<LaunchGroup> groups;
  const bool colocated = layout.colocated();
  groups.push_back({.program = "tandem-router",
                    .config_file = "deploy/router.yaml",
                    .count = 1,
                    .name_prefix = "",
                    .settings = {{"mode", colocated ? "colocated" : "disaggregated"}, {"local_prefill_max_tokens", "0"}}});
  if (colocated) {
    groups.push_back({.program = "tandem-decode",
                      .config_file = "deploy/decode.yaml",
                      .count = layout.colocated_nodes,
                      .name_prefix = "colocated-",
                      .settings = NodeSettings("colocated", decode, transport)});
    return groups;
  }
  groups.push_back({.program = "tandem-prefill",
                    .config_file = "deploy/prefill.yaml",
                    .count = layout.prefill_nodes,
                    .name_prefix = "prefill-",
                    .settings = NodeSettings("prefill", prefill, transport)});
  groups.push_back({.program = "tandem-decode",
                    .config_file = "deploy/decode.yaml",
                    .count = layout.decode_nodes,
                    .name_prefix = "decode-",
                    .settings = NodeSettings("decode", decode, transport)});
  return groups;
}

std::string FormatLaunch(const std::vector<LaunchGroup>& groups, const std::string& transport_note) {
  std::string out;
  for (const LaunchGroup& g : groups) {
    out += "# " + std::to_string(g.count) + " x " + g.program + ": " + g.config_file + " with\n";
    std::string section;
    for (const auto& [key, value] : g.settings) {
      const size_t dot = key.find('.');
      if (dot == std::string::npos) {
        out += key + ": " + value + "\n";
        continue;
      }
      const std::string head = key.substr(0, dot);
      if (head != section) out += head + ":\n";
      section = head;
      out += "  " + key.substr(dot + 1) + ": " + value + "\n";
    }
    std::string flags;
    for (const auto& [key, value] : g.settings) flags += " " + config::ConfigBinder::FlagName(key) + " " + value;
    if (g.name_prefix.empty()) {
      out += "#   " + g.program + " --config " + g.config_file + flags + "\n";
    } else {
      for (int i = 0; i < g.count; ++i) {
        out += "#   " + g.program + " --config " + g.config_file + " " + config::ConfigBinder::FlagName("node_name") + " " + g.name_prefix +
               std::to_string(i) + flags + "\n";
      }
    }
  }
  if (!transport_note.empty()) out += "# " + transport_note + "\n";
  out += "# Each node also needs its own listen_address and http_address (unique per host), and every\n"
         "# process the same router_address / control_address and cluster token.\n";
  return out;
}

}  // namespace tandem::tools
