#!/usr/bin/env bash
# The systemd units as installed (`cmake --install --component config`, with the
# built programs linked in as <prefix>/bin), checked by `systemd-analyze verify`
# with ExecStart pointed at <prefix>/bin: any output (a warning too) fails.
# Then what the units promise: the stop timeout outlasts the installed configs'
# drain_timeout_ms, the token comes from a credential, each config they name is
# installed, and the node units leave the GPUs reachable.
#   systemd_units_test.sh <build dir> <tandem-router> <tandem-prefill> <tandem-decode>
#   systemd_units_test.sh --broken <same>   a unit with a misspelt key and one whose
#                                           program is missing must both be reported
# Exit 77 (CTest: skipped) without systemd-analyze.
set -euo pipefail
broken=0
if [[ "${1:-}" == --broken ]]; then broken=1; shift; fi
build="$1"; router="$2"; prefill="$3"; decode="$4"
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed (apt-get install systemd)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" --component config >/dev/null
mkdir -p "$prefix/bin" "$tmp/units"
ln -s "$router" "$prefix/bin/tandem-router"
ln -s "$prefill" "$prefix/bin/tandem-prefill"
ln -s "$decode" "$prefix/bin/tandem-decode"
for unit in "$prefix"/lib/systemd/system/*.service; do
  sed "s#/usr/bin/#$prefix/bin/#g" "$unit" >"$tmp/units/$(basename "$unit")"
done
# Templates are verified through an instance.
ln -s tandem-prefill@.service "$tmp/units/tandem-prefill@0.service"
ln -s tandem-decode@.service "$tmp/units/tandem-decode@0.service"
units=("$tmp/units/tandem-router.service" "$tmp/units/tandem-prefill@0.service" "$tmp/units/tandem-decode@0.service")

verify() {  # prints what systemd-analyze said; fails on a non-zero exit or any output
  local out rc=0
  out="$(systemd-analyze verify --man=no "$@" 2>&1)" || rc=$?
  [[ -n "$out" ]] && printf '%s\n' "$out"
  [[ $rc -eq 0 && -z "$out" ]]
}

if [[ $broken == 1 ]]; then
  failed=0
  sed 's/^ProtectHome=yes/ProtectHomes=yes/' "$tmp/units/tandem-decode@.service" >"$tmp/units/typo@.service"
  ln -s typo@.service "$tmp/units/typo@0.service"
  if verify "$tmp/units/typo@0.service"; then echo "FAIL: a misspelt key passed"; failed=1; else echo "PASS: misspelt key reported"; fi
  sed "s#$prefix/bin/tandem-router#$prefix/bin/tandem-routr#" "$tmp/units/tandem-router.service" >"$tmp/units/missing.service"
  if verify "$tmp/units/missing.service"; then echo "FAIL: a missing program passed"; failed=1; else echo "PASS: missing program reported"; fi
  exit $failed
fi

failed=0
if verify "${units[@]}"; then echo "PASS: systemd-analyze verify"; else echo "FAIL: systemd-analyze verify"; failed=1; fi
check() {  # <description> <command...>
  if "${@:2}"; then echo "PASS: $1"; else echo "FAIL: $1"; failed=1; fi
}
seconds() { sed -n "s/^$1=\([0-9]*\)s$/\1/p" "$2"; }
for role in prefill decode; do
  unit="$tmp/units/tandem-$role@.service"
  drain_ms="$(sed -n 's/^drain_timeout_ms: *\([0-9]*\).*/\1/p' "$prefix/etc/tandem/$role-0.yaml")"
  stop_s="$(seconds TimeoutStopSec "$unit")"
  check "$role: TimeoutStopSec ${stop_s}s outlasts drain_timeout_ms $drain_ms" test $((stop_s * 1000)) -gt "$drain_ms"
  check "$role: its config is installed" grep -q -- "--config /etc/tandem/$role-%i.yaml" "$unit"
  check "$role: $role-0.yaml is installed" test -f "$prefix/etc/tandem/$role-0.yaml"
  check "$role: GPUs reachable (no device-closing settings)" \
    bash -c "! grep -Eq '^(PrivateDevices|DevicePolicy|DeviceAllow|ProtectClock|MemoryDenyWriteExecute)=' '$unit'"
done
check "router: its config is installed" test -f "$prefix/etc/tandem/router.yaml"
router_drain_ms="$(sed -n 's/^drain_timeout_ms: *\([0-9]*\).*/\1/p' "$prefix/etc/tandem/router.yaml")"
router_stop_s="$(seconds TimeoutStopSec "$tmp/units/tandem-router.service")"
check "router: TimeoutStopSec ${router_stop_s}s outlasts drain_timeout_ms $router_drain_ms" \
  test $((router_stop_s * 1000)) -gt "$router_drain_ms"
for unit in "${units[@]}"; do
  name="$(basename "$unit")"
  check "$name: token from a credential" grep -q -- "--cluster-token-file %d/cluster-token" "$unit"
  check "$name: LoadCredential" grep -q '^LoadCredential=cluster-token:/etc/tandem/cluster-token$' "$unit"
  for key in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes DynamicUser=yes \
             Restart=on-failure KillSignal=SIGTERM; do
    check "$name: $key" grep -qx "$key" "$unit"
  done
done
exit $failed
