// tandem-decode: the decode node process. Config from --config FILE (YAML) and
// flags (see deploy/decode.yaml); SIGTERM drains (readiness fails, no new
// admissions, exit 0 when idle or at drain_timeout_ms).
#include "common/node/node_main.h"
#include "decode_node/decode_node.h"

int main(int argc, char** argv) {
  return tandem::node::RunNodeMain<tandem::decode_node::DecodeNode, tandem::decode_node::DecodeNodeOptions>(argc, argv,
                                                                                                            "decode");
}
