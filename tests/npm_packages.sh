#!/usr/bin/env bash
# What the tests' setup_test_data.sh scripts share: installs pinned npm packages into
# <deps>/npm/<folder>/node_modules (idempotent; quick when already done). <deps> is
# $TANDEM_DEPS_DIR, else <repo>/.deps. Needs node + npm; without them it says so and
# exits 0 (the test then skips with a message).
#   tests/npm_packages.sh TAG FOLDER TEST PACKAGE@VERSION...
set -euo pipefail
tag=$1 folder=$2 test=$3
shift 3
packages=("$@")
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="${TANDEM_DEPS_DIR:-$repo/.deps}"
dir="$deps/npm/$folder"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "[$tag] node/npm not found: $test will skip"
  exit 0
fi
mkdir -p "$dir"
want="${packages[*]}"
if [[ "$(cat "$dir/.installed" 2>/dev/null)" != "$want" ]]; then
  echo "[$tag] installing $want into $dir"
  [[ -f "$dir/package.json" ]] || echo "{\"name\":\"tandem-$folder\",\"private\":true}" > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "${packages[@]}")
  echo "$want" > "$dir/.installed"
fi
echo "[$tag] $want ready in $dir"
