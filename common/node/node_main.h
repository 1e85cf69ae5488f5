// RunNodeMain: the body of a node binary's main(), shared by tandem-prefill and
// tandem-decode. Reads NodeConfig from --config FILE (YAML) and flags, creates
// the node, prints its addresses, and serves until SIGTERM/SIGINT drains it.
// Node must provide: static StatusOr<std::unique_ptr<Node>> Create(Options),
// address(), host(), Idle(), Stop(); Options must have a `config` field.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "common/base/status.h"
#include "common/node/drain_signal.h"
#include "common/node/node_config.h"

namespace tandem::node {

template <typename Node, typename Options>
int RunNodeMain(int argc, char** argv, const std::string& role) {
  const std::string binary = "tandem-" + role;
  BlockTerminationSignals();
  NodeConfig config;
  config.role = role;
  config.node_name = role + "-0";
  config::ConfigBinder binder;
  config.Bind(binder);
  if (std::optional<int> rc = binder.ParseCommandLine(binary, role + " node", argc, argv)) return *rc;
  if (Status token = config.ResolveClusterToken(); !token.ok()) {
    std::fprintf(stderr, "%s: %s\n", binary.c_str(), token.ToString().c_str());
    return 2;
  }
  Options options;
  options.config = config;
  auto node = Node::Create(std::move(options));
  if (!node.ok()) {
    std::fprintf(stderr, "%s: %s\n", binary.c_str(), node.status().ToString().c_str());
    return 1;
  }
  // Machine-readable lines for launchers and tests.
  std::printf("control_address=%s\nhttp_address=%s\n", (*node)->address().c_str(),
              (*node)->host().http_address().c_str());
  std::fflush(stdout);
  int rc = RunUntilDrained([&] { (*node)->host().BeginDrain(); }, [&] { return (*node)->Idle(); },
                           config.drain_timeout_ms, [&] { return (*node)->host().draining(); });
  (*node)->Stop();
  return rc;
}

}  // namespace tandem::node
