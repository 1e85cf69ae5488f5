#!/usr/bin/env bash
# deploy/prometheus/tandem-alerts.yaml with promtool (Debian package prometheus,
# installed by tools/setup.sh):
#   prometheus_rules_test.sh            `promtool check rules` (syntax, PromQL, templates)
#                                       and `promtool test rules tandem_alerts_test.yaml`
#                                       (each alert fires when it should, none on a
#                                       healthy cluster) must pass
#   prometheus_rules_test.sh --broken   the same rules with one broken expression,
#                                       and with one wrong threshold, must fail
# Exit 77 (CTest: skipped) without promtool.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
rules="$repo/deploy/prometheus/tandem-alerts.yaml"
if ! command -v promtool >/dev/null; then
  echo "SKIP: promtool not installed (apt-get install prometheus)"
  exit 77
fi

if [[ "${1:-}" != --broken ]]; then
  promtool check rules "$rules"
  (cd "$here" && promtool test rules tandem_alerts_test.yaml)
  echo "PASS: alert rules check and unit tests"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failed=0
# A copy laid out as the unit test file expects (../../deploy/prometheus/).
mkdir -p "$tmp/deploy/prometheus" "$tmp/tests/deploy"
cp "$here/tandem_alerts_test.yaml" "$tmp/tests/deploy/"
broken="$tmp/deploy/prometheus/tandem-alerts.yaml"

sed '0,/expr: sum by (instance) (tandem_router_nodes{role="decode"}) == 0/s//expr: sum by (instance) (tandem_router_nodes{role="decode"} == 0/' \
  "$rules" >"$broken"
if cmp -s "$rules" "$broken"; then echo "FAIL: the expression to break was not found"; exit 1; fi
if promtool check rules "$broken" >"$tmp/out" 2>&1; then
  echo "FAIL: promtool check rules accepted an unbalanced expression"
  failed=1
else
  echo "PASS: promtool check rules refused an unbalanced expression: $(grep -m1 -o 'unclosed left parenthesis' "$tmp/out" || head -1 "$tmp/out")"
fi

sed 's/expr: tandem_node_ready == 0/expr: tandem_node_ready == 1/' "$rules" >"$broken"
if cmp -s "$rules" "$broken"; then echo "FAIL: the threshold to break was not found"; exit 1; fi
if (cd "$tmp/tests/deploy" && promtool test rules tandem_alerts_test.yaml) >"$tmp/out" 2>&1; then
  echo "FAIL: promtool test rules passed an alert that fires on healthy nodes"
  failed=1
else
  echo "PASS: promtool test rules caught TandemNodeNotReady firing on healthy nodes"
fi
exit $failed
