#!/usr/bin/env bash
# Installs the Kubernetes schema validator for k8s_manifests_test (idempotent;
# quick when already done):
#   <deps>/npm/k8s-validate/node_modules/kubernetes-models   the Kubernetes OpenAPI
#                                                            schemas as validating models
#   <deps>/npm/k8s-validate/node_modules/yaml                 YAML parser
# <deps> is $TANDEM_DEPS_DIR, else <repo>/.deps. Needs node + npm; without them it
# says so and exits 0 (the test then skips with a message).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deps="${TANDEM_DEPS_DIR:-$repo/.deps}"
dir="$deps/npm/k8s-validate"
# Pinned: kubernetes-models 4.5.x is the last line that runs on node 18/20
# (5.x needs node >= 22; Debian 12 ships node 18).
packages=("kubernetes-models@4.5.1" "yaml@2.9.1")

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "[deploy] node/npm not found: k8s_manifests_test will skip"
  exit 0
fi
mkdir -p "$dir"
want="${packages[*]}"
if [[ "$(cat "$dir/.installed" 2>/dev/null)" != "$want" ]]; then
  echo "[deploy] installing $want into $dir"
  [[ -f "$dir/package.json" ]] || echo '{"name":"tandem-k8s-validate","private":true}' > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "${packages[@]}")
  echo "$want" > "$dir/.installed"
fi
echo "[deploy] kubernetes validator ready in $dir"
