#!/usr/bin/env bash
# Run HERE (the development machine, Debian 12, apt works): downloads the Debian packages the GPU
# machine image lacks for building and running the whole cluster (UCX for the nodes' KV transport,
# PCRE2 headers and utf8proc for the router's tokenizer, libnuma under UCX) into .deps/debs
# (git-ignored). Carry ".deps/debs" with the `run` call; tools/gpu/cluster_check.sh unpacks them
# there with dpkg -x (lib.sh: use_debs). Debian 12 libraries need glibc >= 2.36; the image has 2.39.
#   Usage: tools/gpu/fetch_deps.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PACKAGES=(libucx0 libucx-dev libnuma1 libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2)
mkdir -p .deps/debs
rm -f .deps/debs/*.deb
# apt's sandbox user cannot write into a root-owned checkout; download from a scratch folder.
scratch=$(mktemp -d)
chmod 777 "$scratch"
(cd "$scratch" && apt-get download "${PACKAGES[@]}")
mv "$scratch"/*.deb .deps/debs/
rmdir "$scratch"
ls -l .deps/debs
echo "carried size: $(du -sh .deps/debs | cut -f1) (limit for the whole carried tree: 64 MiB)"
