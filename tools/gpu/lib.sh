# Shell helpers of the GPU-machine scripts (engine_check.sh, cluster_check.sh); sourced, not run.
# The caller sets T0 (start, `date +%s`), LOG (the build/step log) and B (the binary folder).

# Prints and logs a step with the seconds since T0.
step() { echo "== $1 ($(( $(date +%s) - T0 )) s)" | tee -a "$LOG"; }

# The first file named $1 under $B.
find_bin() { find "$B" -name "$1" -type f | head -1; }

# use_prebuilt DIR|FILE.tar.xz: binaries built elsewhere (tools/gpu/pack_prebuilt.sh). A tarball is
# unpacked into a temporary folder; B becomes the folder and every lib/ under it goes on
# LD_LIBRARY_PATH (the shared libraries the GPU image lacks travel there).
use_prebuilt() {
  local src=$1
  if [[ "$src" == *.tar.xz || "$src" == *.tar.gz ]]; then
    local dir=${TANDEM_PREBUILT_UNPACK:-/tmp/tandem_prebuilt}
    rm -rf "$dir" && mkdir -p "$dir"
    tar -xf "$src" -C "$dir" || { echo "cannot unpack $src"; return 1; }
    src=$dir
  fi
  [ -d "$src" ] || { echo "TANDEM_GPU_PREBUILT=$src is not a folder or tarball"; return 1; }
  B=$src
  local lib
  while IFS= read -r lib; do
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done < <(find "$B" -type d -name lib)
  return 0
}

# use_debs DEBS_DIR ROOT: unpacks every .deb of DEBS_DIR (tools/gpu/fetch_deps.sh) into ROOT with
# dpkg -x, points their pkg-config files at ROOT, and sets what CMake and the loader need:
# PKG_CONFIG_PATH, LD_LIBRARY_PATH, and DEPS_CMAKE_ARGS (prefix path and rpath-link).
use_debs() {
  local debs=$1 root=$2 deb
  local libdir="$root/usr/lib/x86_64-linux-gnu"
  ls "$debs"/*.deb > /dev/null 2>&1 || { echo "no .deb files in $debs (run tools/gpu/fetch_deps.sh)"; return 1; }
  if [ ! -f "$root/.unpacked" ]; then
    rm -rf "$root" && mkdir -p "$root"
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$root" || { echo "dpkg -x $deb failed"; return 1; }; done
    # The .pc files name /usr; the headers and libraries are under ROOT.
    find "$root" -name '*.pc' -exec sed -i -E "s#^(prefix *= *)/usr#\1$root/usr#" {} +
    # UCX's InfiniBand/RDMA modules want libibverbs, which neither side needs (shm/tcp only).
    rm -f "$libdir"/ucx/libuct_ib* "$libdir"/ucx/libuct_rdmacm*
    touch "$root/.unpacked"
  fi
  export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  DEPS_CMAKE_ARGS=(-DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$libdir")
}
