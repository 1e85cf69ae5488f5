#!/usr/bin/env bash
# Renders the Kubernetes kustomizations with kustomize (`kubectl kustomize`;
# tools/setup.sh installs Debian's kubernetes-client) and validates every object
# with k8s_validate.mjs (the Kubernetes schemas via kubernetes-models, plus the
# processes' contract).
#   k8s_manifests_test.sh            deploy/k8s/base and overlays/{cpu-demo,gpu} must pass
#   k8s_manifests_test.sh --broken   each tests/deploy/k8s_broken/<case> (the
#                                    cpu-demo overlay with one deliberate fault)
#                                    must fail, with the message in its expect.txt
# Exit 77 (CTest: skipped) when kubectl or the npm validator is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
modules="${TANDEM_DEPS_DIR:-$repo/.deps}/npm/k8s-validate/node_modules"
if ! command -v kubectl >/dev/null; then
  echo "SKIP: kubectl not installed (tools/setup.sh installs kubernetes-client)"
  exit 77
fi
if ! command -v node >/dev/null || [[ ! -d "$modules/kubernetes-models" ]]; then
  echo "SKIP: $modules/kubernetes-models missing (bash tests/deploy/setup_test_data.sh)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

render() {  # <kustomization dir> <out file>
  if ! kubectl kustomize "$1" >"$2" 2>"$tmp/kustomize.err"; then
    cat "$tmp/kustomize.err"
    echo "FAIL: kubectl kustomize $1"
    return 1
  fi
}

failed=0
if [[ "${1:-}" != --broken ]]; then
  for overlay in base overlays/cpu-demo overlays/gpu; do
    flags=()
    [[ $overlay == overlays/gpu ]] && flags=(--expect-gpu)
    render "$repo/deploy/k8s/$overlay" "$tmp/${overlay##*/}.yaml" || { failed=1; continue; }
    if node "$here/k8s_validate.mjs" "$modules" "$tmp/${overlay##*/}.yaml" "${flags[@]}"; then
      echo "PASS: $overlay"
    else
      echo "FAIL: $overlay"
      failed=1
    fi
  done
else
  for case_dir in "$here"/k8s_broken/*/; do
    name="$(basename "$case_dir")"
    render "$case_dir" "$tmp/$name.yaml" || { failed=1; continue; }
    expected="$(cat "$case_dir/expect.txt")"
    if out="$(node "$here/k8s_validate.mjs" "$modules" "$tmp/$name.yaml" 2>&1)"; then
      echo "FAIL: $name passed the validator"
      failed=1
    elif ! grep -qF -- "$expected" <<<"$out"; then
      printf '%s\n' "$out"
      echo "FAIL: $name failed, but not with: $expected"
      failed=1
    else
      echo "PASS: $name rejected: $expected"
    fi
  done
fi
exit $failed
