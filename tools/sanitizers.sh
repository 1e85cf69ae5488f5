#!/usr/bin/env bash
# Builds the tests named in tools/sanitizer_tests.txt under ASan+UBSan and TSan and runs them.
# Each line of that file: "<address|thread> <ctest name>".
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
plain=${TANDEM_BUILD_DIR:-build}
# load_loop BUILD: runs BUILD's load_e2e_test until $dir/load_loop.stop appears; fails on a failed run.
load_loop() {
  local runs=0
  rm -f "$dir/load_loop.stop"
  while [ ! -e "$dir/load_loop.stop" ]; do
    TANDEM_SOURCE_DIR=$PWD TANDEM_BINARY_DIR=$PWD/$1 "$1/tests/e2e/load_e2e_test" || return 1
    runs=$((runs + 1))
  done
  echo "load beside the ASan suites: $runs runs of load_e2e_test, all passed"
}
load_pid=""
# A failed suite (set -e) still stops the load and waits for it: no cluster is left running.
trap '[ -n "$load_pid" ] && { touch "$dir/load_loop.stop"; wait "$load_pid" || true; }' EXIT
for kind in address thread; do
  names=$(awk -v k="$kind" '$1 == k { print $2 }' tools/sanitizer_tests.txt)
  [ -n "$names" ] || continue
  dir=build-$kind
  cmake -S . -B "$dir" -G Ninja -DTANDEM_CUDA=OFF -DTANDEM_SANITIZE="$kind" "${launcher[@]}" >/dev/null
  # shellcheck disable=SC2086
  ninja -C "$dir" -j"$(nproc)" $names
  regex="^($(echo $names | tr ' ' '|'))\$"
  # Under ASan the suites run with a parallel CPU load beside them (issue 27): copies of the
  # plain build's load_e2e_test back to back, each of which must pass too.
  load_pid=""
  if [ "$kind" = address ] && [ -x "$plain/tests/e2e/load_e2e_test" ]; then
    load_loop "$plain" > "$dir/load_loop.log" 2>&1 &
    load_pid=$!
  fi
  # UCX's memory hooks (libucm intercepts madvise/mmap) crash TSan at thread exit; the
  # registration cache they feed is not needed over tcp/shm.
  UCX_MEM_EVENTS=no UCX_MEM_MMAP_HOOK_MODE=none \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$dir" --output-on-failure -R "$regex" --timeout 900
  if [ -n "$load_pid" ]; then
    touch "$dir/load_loop.stop"
    if ! wait "$load_pid"; then
      tail -n 60 "$dir/load_loop.log"
      echo "sanitizers: the load beside the ASan suites failed ($dir/load_loop.log)"
      exit 1
    fi
    tail -n 1 "$dir/load_loop.log"
    load_pid=""
  fi
done
