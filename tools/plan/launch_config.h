// The launch configuration of a planned layout: for the router and each node
// pool, the program, how many, and the config keys (YAML keys of
// deploy/{router,prefill,decode}.yaml; each is also a flag) whose values the
// plan assumed — the profile's engine settings, the transfer path, the role and
// serving mode. Keys come from the real binders (NodeConfig, ClusterConfig);
// tests/tools/plan checks them against the shipped configs.
// Thread rule: free functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "planner/layout.h"
#include "planner/profile.h"

namespace tandem::tools {

struct LaunchGroup {
  std::string program;      // tandem-router, tandem-prefill, tandem-decode
  std::string config_file;  // the shipped example it starts from (deploy/…)
  int count = 0;
  std::string name_prefix;  // node_name of node i: prefix + i (empty for the router)
  std::vector<std::pair<std::string, std::string>> settings;  // YAML key, value
};

// The groups for `layout`; `transport` is the profile path the plan priced.
std::vector<LaunchGroup> LaunchGroups(const planner::Layout& layout, const planner::Profile& prefill,
                                      const planner::Profile& decode, const planner::TransferPath& transport);

// As text: per group a YAML fragment and the command line of each node.
std::string FormatLaunch(const std::vector<LaunchGroup>& groups, const std::string& transport_note);

}  // namespace tandem::tools
