#!/usr/bin/env bash
# Installs the system packages Tandem needs (Debian 12 / Ubuntu 24.04), then configures and
# builds the tree into ${TANDEM_BUILD_DIR:-build}. Idempotent: apt-get runs only when a package
# is missing. Usage: tools/setup.sh [extra cmake args...]
# TANDEM_SETUP_BUILD_ONLY=1: only what the build needs (no test tools: systemd,
# kubectl, Node.js).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache git
  libboost-dev libboost-system-dev protobuf-compiler libprotobuf-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev libssl-dev
  libpcre2-dev libutf8proc-dev libucx-dev ucx-utils
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-jinja2 curl openssl
  dpkg-dev file
)
# Tools only the tests use (TANDEM_SETUP_BUILD_ONLY=1 skips them, as the container
# recipe's build stage does): promtool (prometheus) checks metrics pages and alert
# rules, systemd-analyze checks the units, kubectl's built-in
# kustomize renders deploy/k8s. kubectl comes from Debian 12's kubernetes-client
# (not in Ubuntu 24.04), unless some kubectl is installed already: the packages
# conflict over /usr/bin/kubectl.
if [ "${TANDEM_SETUP_BUILD_ONLY:-0}" != 1 ]; then
  PACKAGES+=(prometheus systemd)
  if ! command -v kubectl >/dev/null 2>&1 && grep -qx 'ID=debian' /etc/os-release; then
    PACKAGES+=(kubernetes-client)
  fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm (test references); keep an existing Node.js installation.
if [ "${TANDEM_SETUP_BUILD_ONLY:-0}" != 1 ] && ! command -v npm >/dev/null 2>&1; then
  command -v node >/dev/null 2>&1 && missing+=(npm) || missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${TANDEM_BUILD_DIR:-build}
# ccache keys on paths relative to the checkout, so clones in other folders share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# nvcc is often installed outside PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S . -B "$BUILD_DIR" -G Ninja "${launcher[@]}" "$@" >/dev/null
ninja -C "$BUILD_DIR" -j"$(nproc)"
