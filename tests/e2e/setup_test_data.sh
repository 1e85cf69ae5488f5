#!/usr/bin/env bash
# Installs the official OpenAI npm client for openai_client_e2e_test (idempotent;
# quick when already done):
#   <deps>/npm/openai-client/node_modules/openai
# <deps> is $TANDEM_DEPS_DIR, else <repo>/.deps. Needs node + npm; without them it
# says so and exits 0 (the test then skips with a message).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deps="${TANDEM_DEPS_DIR:-$repo/.deps}"
dir="$deps/npm/openai-client"
# Pinned: the last 6.x release (7.x needs node >= 22; Debian 12 ships node 18/20).
package="openai@6.30.1"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "[e2e] node/npm not found: openai_client_e2e_test will skip"
  exit 0
fi
mkdir -p "$dir"
if [[ "$(cat "$dir/.installed" 2>/dev/null)" != "$package" ]]; then
  echo "[e2e] installing $package into $dir"
  [[ -f "$dir/package.json" ]] || echo '{"name":"tandem-e2e-openai-client","private":true}' > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "$package")
  echo "$package" > "$dir/.installed"
fi
echo "[e2e] openai client ready in $dir"
