#!/usr/bin/env bash
# The packages end to end (docs/operations.md, "Install"): builds the .deb and
# the .tar.gz with CPack from the build, unpacks the .deb into a scratch root
# (dpkg -x) and, from a folder outside the checkout with a bare environment,
# starts a cluster of the installed tandem-router, tandem-prefill and
# tandem-decode with the installed /etc/tandem configs and a tiny model made
# by the installed tandem-make-model; one chat completion must come back
# through the router with its prompt prefilled on the prefill node (KV over
# UCX), and every process must stop cleanly on SIGTERM. Checks on the way:
# Depends computed by dpkg-shlibdeps, the configs are conffiles, no RPATH, every
# library resolved by the system, no path of the checkout or the build in the
# programs; the tarball is relocatable (bin/, etc/tandem/, share/tandem/).
#   package_e2e_test.sh <source dir> <build dir>
set -euo pipefail
source_dir="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
tmp="$(mktemp -d /tmp/tandem-package-e2e.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp"
step() { echo "--- $*"; }
die() {
  echo "FAIL: $*"
  for f in "$tmp"/*.log; do [[ -f $f ]] && { echo "== $f"; tail -20 "$f"; }; done
  exit 1
}

step "cpack -G DEB;TGZ"
start=$SECONDS
cpack --config "$build/CPackConfig.cmake" -G "DEB;TGZ" -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || die "cpack"
deb="$(ls "$tmp"/pkg/tandem_*.deb)"
tgz="$(ls "$tmp"/pkg/tandem-*.tar.gz)"
echo "built $(basename "$deb") and $(basename "$tgz") in $((SECONDS - start)) s"
rm -rf "$tmp/pkg/_CPack_Packages"

step "package metadata"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
for lib in libucx0 libprotobuf libspdlog libyaml-cpp libssl3 libc6; do
  grep -q "$lib" <<<"$depends" || die "Depends lacks $lib"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$tmp/conffiles" || die "no conffiles"
for f in /etc/tandem/router.yaml /etc/tandem/prefill-0.yaml /etc/tandem/decode-0.yaml; do
  grep -qx "$f" "$tmp/conffiles" || die "$f is not a conffile"
done

step "dpkg -x into a scratch root"
root="$tmp/root"
dpkg -x "$deb" "$root"
bin="$root/usr/bin"
for f in usr/bin/tandem-router usr/bin/tandem-prefill usr/bin/tandem-decode usr/bin/tandem-ctl usr/bin/tandem-make-model \
         usr/bin/tandem-generate usr/bin/tandem-bench-serving usr/bin/tandem-profile etc/tandem/router.yaml \
         etc/tandem/prefill-0.yaml etc/tandem/decode-0.yaml usr/lib/systemd/system/tandem-router.service \
         usr/lib/systemd/system/tandem-decode@.service usr/share/tandem/doc/operations.md \
         usr/share/tandem/examples/k8s/base/kustomization.yaml usr/share/tandem/examples/prometheus/tandem-alerts.yaml; do
  [[ -e "$root/$f" ]] || die "the package lacks /$f"
done

step "the programs need nothing from the checkout or the build"
for program in "$bin"/*; do
  name="$(basename "$program")"
  if readelf -d "$program" | grep -Eq 'R(UN)?PATH'; then die "$name has an RPATH: $(readelf -d "$program" | grep PATH)"; fi
  ldd_out="$(env -i ldd "$program")"
  grep -q "not found" <<<"$ldd_out" && die "$name: $(grep 'not found' <<<"$ldd_out")"
  grep -qF -e "$source_dir" -e "$build" <<<"$ldd_out" && die "$name loads a library from the checkout"
  if grep -qaF -e "$source_dir" -e "$build" "$program"; then
    die "$name holds a path of the checkout: $(grep -aoF -e "$source_dir" -e "$build" "$program" | sort -u | head -3)"
  fi
done
echo "no RPATH, every library from the system, no checkout path in $(ls "$bin" | wc -l) programs"

step "a tiny model from the installed tandem-make-model"
# A bare environment: nothing from the build (no TANDEM_*, no LD_LIBRARY_PATH).
run=(env -i PATH=/usr/bin:/bin HOME="$tmp")
"${run[@]}" "$bin/tandem-make-model" --preset tiny -o "$tmp/models/default" >"$tmp/make-model.log" 2>&1 || die "tandem-make-model"
head -c 24 /dev/urandom | base64 >"$tmp/cluster-token"
chmod 600 "$tmp/cluster-token"

step "router + prefill + decode from the installed configs"
read -r http control decode_http prefill_http < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
etc="$root/etc/tandem"
common=(--model-dir "$tmp/models/default" --cluster-token-file "$tmp/cluster-token")
"${run[@]}" "$bin/tandem-router" --config "$etc/router.yaml" "${common[@]}" --listen-port "$http" \
  --control-address "127.0.0.1:$control" >"$tmp/router.log" 2>&1 &
pids+=($!)
for role in decode prefill; do
  port_var="${role}_http"
  "${run[@]}" "$bin/tandem-$role" --config "$etc/$role-0.yaml" "${common[@]}" --router-address "127.0.0.1:$control" \
    --listen-address 127.0.0.1:0 --http-address "127.0.0.1:${!port_var}" >"$tmp/$role.log" 2>&1 &
  pids+=($!)
done
ready=0
for _ in $(seq 1 300); do
  if curl -sf "http://127.0.0.1:$http/health/ready" >/dev/null && curl -sf "http://127.0.0.1:$decode_http/health/ready" >/dev/null &&
     curl -sf "http://127.0.0.1:$prefill_http/health/ready" >/dev/null; then
    ready=1
    break
  fi
  sleep 0.2
done
[[ $ready == 1 ]] || die "the cluster did not become ready in 60 s"

step "one chat completion through the router"
curl -sS -o "$tmp/reply.json" -w '%{http_code}' "http://127.0.0.1:$http/v1/chat/completions" \
  -H 'Content-Type: application/json' \
  -d '{"model": "default", "max_tokens": 16, "temperature": 0,
       "messages": [{"role": "user", "content": "Say something about installed packages."}]}' >"$tmp/status" ||
  die "curl"
[[ "$(cat "$tmp/status")" == 200 ]] || die "HTTP $(cat "$tmp/status"): $(cat "$tmp/reply.json")"
python3 - "$tmp/reply.json" <<'PY' || die "bad reply: $(cat "$tmp/reply.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["object"] == "chat.completion" and r["model"] == "default", r
c = r["choices"][0]
assert c["message"]["role"] == "assistant" and isinstance(c["message"]["content"], str), c
assert c["finish_reason"] in ("stop", "length"), c
assert r["usage"]["completion_tokens"] >= 1 and r["usage"]["prompt_tokens"] > 1, r["usage"]
print("reply:", json.dumps(c["message"]["content"])[:80], "usage:", r["usage"])
PY
sent="$(curl -sf "http://127.0.0.1:$prefill_http/metrics" | awk '/^tandem_kv_transfer_bytes_total\{.*direction="sent"/ {s += $2} END {print s + 0}')"
[[ "${sent%.*}" -gt 0 ]] || die "the prefill node sent no KV (tandem_kv_transfer_bytes_total sent = $sent)"
echo "prefill node sent $sent KV bytes to the decode node"

step "SIGTERM: the nodes drain and exit 0, then the router"
for i in 2 1 0; do
  kill -TERM "${pids[$i]}"
  rc=0
  wait "${pids[$i]}" || rc=$?
  [[ $rc == 0 ]] || die "process ${pids[$i]} exited $rc"
done
pids=()

step "the tarball is relocatable"
mkdir "$tmp/tgz"
tar -xzf "$tgz" -C "$tmp/tgz"
top="$(ls -d "$tmp"/tgz/*/)"
for f in bin/tandem-router bin/tandem-decode etc/tandem/router.yaml etc/tandem/decode-0.yaml \
         lib/systemd/system/tandem-prefill@.service share/tandem/doc/operations.md; do
  [[ -e "$top/$f" ]] || die "the tarball lacks $f"
done
"${run[@]}" "$top/bin/tandem-router" --help >/dev/null || die "the tarball's tandem-router --help"
echo "PASS: packages install and serve"
