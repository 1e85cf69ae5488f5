#!/usr/bin/env bash
# On the GPU machine: kernel timelines (CUPTI) of decode steps for several builds or
# settings, one after another: model_bench --timeline per VARIANT (NAME=DIR[:ENV=VALUE,...]
# [@ARG,...], as tools/gpu/ab_model.sh). Prints each variant's step times; the per-kernel
# tables go to $OUT/timeline.log.
# Usage: tools/gpu/timeline.sh VARIANT...
#   e.g. tools/gpu/timeline.sh base=build-carry/base new=build-carry/new
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
mkdir -p "$OUT"
log="$OUT/timeline.log"
: > "$log"
for v in "$@"; do
  name=${v%%=*}; rest=${v#*=}; args=""
  [[ "$rest" == *@* ]] && { args=${rest#*@}; rest=${rest%%@*}; }
  dir=${rest%%:*}; envs=""
  [[ "$rest" == *:* ]] && envs=${rest#*:}
  echo "==== $name: $dir ${envs//,/ } ${args//,/ }" >> "$log"
  env ${envs//,/ } timeout 200 "$dir/model_bench" --timeline ${args//,/ } >> "$log" 2>&1
  echo "== $name rc=$?"
done
grep -E '^==== |^ceilings|traced:' "$log"
