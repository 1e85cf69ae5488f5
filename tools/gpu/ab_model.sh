#!/usr/bin/env bash
# On the GPU machine: A/B of whole decode steps between builds (or environment settings),
# side by side in one run. Each VARIANT is NAME=DIR[:ENV=VALUE,...][@ARG,...]; every round
# runs DIR/model_bench --decode-only ARG... once per variant, in turn, so drift hits all alike.
# Prints the b=1 / b=8 1K decode rows of every run, then the median per variant.
# Usage: tools/gpu/ab_model.sh ROUNDS VARIANT...
#   e.g. tools/gpu/ab_model.sh 3 base=build-carry/base new=build-carry/new
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
rounds=$1; shift
for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    name=${v%%=*}; rest=${v#*=}; args=""
    [[ "$rest" == *@* ]] && { args=${rest#*@}; rest=${rest%%@*}; }
    dir=${rest%%:*}; envs=""
    [[ "$rest" == *:* ]] && envs=${rest#*:}
    log="$OUT/ab_${name}_$r.log"
    env ${envs//,/ } timeout 300 "$dir/model_bench" --decode-only ${args//,/ } > "$log" 2>&1
    echo "== $name round $r rc=$? $(grep -E '^ceilings' "$log")"
    grep -E '^(decode b=|  b=1)' "$log" | awk -v n="$name" '{print n": "$0}'
  done
done
echo "---- medians (ms; ceiling GB/s) ----"
python3 - "$OUT" "$@" <<'PY'
import re, sys, glob, statistics
out, variants = sys.argv[1], [v.split("=")[0] for v in sys.argv[2:]]
rows = {}
for name in variants:
    for log in sorted(glob.glob(f"{out}/ab_{name}_*.log")):
        for line in open(log):
            m = re.match(r"^ceilings: HBM read (\d+)", line)
            if m: rows.setdefault(("ceiling GB/s", name), []).append(float(m.group(1)))
            m = re.match(r"^((?:decode b=|  b=1).*?)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+(?:\s+[\d.]+)?$", line)
            if m: rows.setdefault((m.group(1).strip(), name), []).append(float(m.group(2)))
keys = []
for k, _ in rows:
    if k not in keys: keys.append(k)
print(f"{'row':32s}" + "".join(f"{n:>12s}" for n in variants))
for k in keys:
    print(f"{k:32s}" + "".join(f"{statistics.median(rows.get((k, n), [float('nan')])):12.3f}" for n in variants))
PY
