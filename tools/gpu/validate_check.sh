#!/usr/bin/env bash
# The planner's validation sweep (tandem-validate, issue 24) on the GPU machine's CPU cores: the CPU
# backend and the tiny model as on the build box, but on 16 cores, where no node shares a core with
# another and nothing else runs. Run on the GPU machine with binaries packed here:
#   PACK_BUILD_DIR=build PACK_BUILD_TYPE=RelWithDebInfo PACK_OUT=build-carry/validate.tar.xz \
#     PACK_TARGETS="tandem-validate tandem-router tandem-prefill tandem-decode tandem-make-model \
#     tandem-bench-serving tandem-profile" tools/gpu/pack_prebuilt.sh
#   TANDEM_GPU_PREBUILT=build-carry/validate.tar.xz tools/gpu/validate_check.sh [tandem-validate flags]
# Writes $OUT/validate.log (the tables and the summary), $OUT/validation.json and $OUT/runs.tar.xz
# (every run's logs and records).
set -uo pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
OUT=${OUT:-/tmp/validate_check}
LOG=$OUT/steps.log
mkdir -p "$OUT"
source tools/gpu/lib.sh
[ -n "${TANDEM_GPU_PREBUILT:-}" ] || { echo "validate_check.sh: set TANDEM_GPU_PREBUILT"; exit 1; }
use_prebuilt "$TANDEM_GPU_PREBUILT" || exit 1

# tandem-validate finds every program in a build tree's layout (router/tandem-router, ...).
tree=$(mktemp -d) runs=$(mktemp -d)
trap 'rm -rf "$tree" "$runs"' EXIT
declare -A DIR_OF=([tandem-router]=router [tandem-prefill]=prefill_node [tandem-decode]=decode_node
                   [tandem-make-model]=tools/make_model [tandem-bench-serving]=tools/bench_serving
                   [tandem-profile]=tools/profile [tandem-validate]=tools/validate)
for p in "${!DIR_OF[@]}"; do
  f=$(find_bin "$p")
  [ -n "$f" ] || { echo "validate_check.sh: $p is not in $TANDEM_GPU_PREBUILT"; exit 1; }
  mkdir -p "$tree/${DIR_OF[$p]}" && ln -s "$f" "$tree/${DIR_OF[$p]}/$p"
done

# VALIDATE_PROBE_CORE=N: meanwhile a quick tandem-profile runs again and again pinned to core N (or, with
# "rotate", to each core in turn), its time of day, core, and 1 × 512 and 4 × 512 prefill times in
# $OUT/probe.txt: the host's speed beside the sweep's, measured by something that is not the cluster
# (the runs' end times are the records' modification times in runs.tar.xz).
probe_pid=
if [ -n "${VALIDATE_PROBE_CORE:-}" ]; then
  probe_dir=$(mktemp -d)
  "$tree/tools/make_model/tandem-make-model" --preset tiny -f -o "$probe_dir/tiny" > /dev/null
  ( i=0
    while true; do
      core=$VALIDATE_PROBE_CORE
      [ "$core" = rotate ] && core=$((i++ % $(nproc)))
      taskset -c "$core" "$tree/tools/profile/tandem-profile" --model-dir "$probe_dir/tiny" --quick \
        --transfer-transports local --output "$probe_dir/p.json" > "$probe_dir/p.log" 2>&1 || break
      echo "$(date +%s.%N) $core $(awk -F'|' '/^prefill/ {p = 1} /^decode/ {p = 0}
                                   p && $2+0 == 1 && $3+0 == 512 {a=$5} p && $2+0 == 4 && $3+0 == 512 {b=$5}
                                   END {print a, b}' "$probe_dir/p.log")" >> "$OUT/probe.txt"
    done ) &
  probe_pid=$!
fi

# Stopped at VALIDATE_LIMIT_S so that the logs of the points run so far still come back.
step "tandem-validate on $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg)"
timeout "${VALIDATE_LIMIT_S:-540}" "$tree/tools/validate/tandem-validate" --binary-dir "$tree" --source-dir "$PWD" --out-dir "$runs" "$@" \
  > "$OUT/validate.log" 2>&1
rc=$?
[ -n "$probe_pid" ] && kill "$probe_pid" 2> /dev/null
cp "$runs/validation.json" "$OUT/" 2> /dev/null
tar -cJf "$OUT/runs.tar.xz" -C "$runs" .
step "tandem-validate exit $rc"
tail -n 12 "$OUT/validate.log"
exit $rc
