// tandem-prefill: the prefill node process. Config from --config FILE (YAML) and
// flags (see deploy/prefill.yaml); SIGTERM drains (readiness fails, no new
// admissions, exit 0 when idle or at drain_timeout_ms).
#include "common/node/node_main.h"
#include "prefill_node/prefill_node.h"

int main(int argc, char** argv) {
  return tandem::node::RunNodeMain<tandem::prefill_node::PrefillNode, tandem::prefill_node::PrefillNodeOptions>(
      argc, argv, "prefill");
}
