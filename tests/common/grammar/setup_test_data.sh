#!/usr/bin/env bash
# Installs the ajv JSON Schema validator for grammar_generation_test (idempotent;
# quick when already done):
#   <deps>/npm/ajv/node_modules/ajv
# <deps> is $TANDEM_DEPS_DIR, else <repo>/.deps. Needs node + npm; without them it
# says so and exits 0 (the test then skips with a message).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
deps="${TANDEM_DEPS_DIR:-$repo/.deps}"
dir="$deps/npm/ajv"
# Pinned: ajv 8 (draft 2020-12 via ajv/dist/2020).
package="ajv@8.17.1"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "[grammar] node/npm not found: grammar_generation_test will skip"
  exit 0
fi
mkdir -p "$dir"
if [[ "$(cat "$dir/.installed" 2>/dev/null)" != "$package" ]]; then
  echo "[grammar] installing $package into $dir"
  [[ -f "$dir/package.json" ]] || echo '{"name":"tandem-grammar-ajv","private":true}' > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "$package")
  echo "$package" > "$dir/.installed"
fi
echo "[grammar] ajv ready in $dir"
