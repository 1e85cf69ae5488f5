#!/usr/bin/env bash
# Builds the tests named in tools/sanitizer_tests.txt under ASan+UBSan and TSan and runs them.
# Each line of that file: "<address|thread> <ctest name>".
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
for kind in address thread; do
  names=$(awk -v k="$kind" '$1 == k { print $2 }' tools/sanitizer_tests.txt)
  [ -n "$names" ] || continue
  dir=build-$kind
  cmake -S . -B "$dir" -G Ninja -DTANDEM_CUDA=OFF -DTANDEM_SANITIZE="$kind" "${launcher[@]}" >/dev/null
  # shellcheck disable=SC2086
  ninja -C "$dir" -j"$(nproc)" $names
  regex="^($(echo $names | tr ' ' '|'))\$"
  # UCX's memory hooks (libucm intercepts madvise/mmap) crash TSan at thread exit; the
  # registration cache they feed is not needed over tcp/shm.
  UCX_MEM_EVENTS=no UCX_MEM_MMAP_HOOK_MODE=none \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir "$dir" --output-on-failure -R "$regex" --timeout 900
done
