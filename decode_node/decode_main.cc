// tandem-decode: the decode node process. Config from --config FILE (YAML) and
// flags (see deploy/decode.yaml); SIGTERM drains (readiness fails, no new
// admissions, exit 0 when idle or at drain_timeout_ms).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/base/logging.h"
#include "common/node/drain_signal.h"
#include "decode_node/decode_node.h"

int main(int argc, char** argv) {
  using namespace tandem;
  node::BlockTerminationSignals();
  node::NodeConfig config;
  config.role = "decode";
  config.node_name = "decode-0";
  config::ConfigBinder binder;
  config.Bind(binder);
  CLI::App app{"tandem-decode: decode node"};
  binder.AddFlags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Status applied = binder.Apply();
  if (!applied.ok()) {
    std::fprintf(stderr, "tandem-decode: %s\n", applied.ToString().c_str());
    return 2;
  }
  decode_node::DecodeNodeOptions options;
  options.config = config;
  auto node = decode_node::DecodeNode::Create(std::move(options));
  if (!node.ok()) {
    std::fprintf(stderr, "tandem-decode: %s\n", node.status().ToString().c_str());
    return 1;
  }
  // Machine-readable lines for launchers and tests.
  std::printf("control_address=%s\nhttp_address=%s\n", (*node)->address().c_str(),
              (*node)->host().http_address().c_str());
  std::fflush(stdout);
  int rc = node::RunUntilDrained([&] { (*node)->host().BeginDrain(); }, [&] { return (*node)->Idle(); },
                                 config.drain_timeout_ms);
  (*node)->Stop();
  return rc;
}
