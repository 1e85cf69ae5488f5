# Shell helpers of the GPU-machine scripts (engine_check.sh, cluster_check.sh, cluster_faults.sh,
# two_gpu_check.sh); sourced, not run. The caller sets T0 (start, `date +%s`), LOG (the build/step
# log) and B (the binary folder).

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

# ---- the cluster: router + prefill + decode processes (cluster_check.sh, cluster_faults.sh, two_gpu_check.sh) ----
# The caller sets LOCAL (1: CPU backend here), SCRIPT (its name, for messages), OUT, WORK, LOGS
# and, before cluster_defaults, any of its own defaults; `declare -A PID READY_MS LAUNCHED_MS`.

# die MSG: logs MSG, prints the tails of the logs, exits 1.
die() { echo "$SCRIPT: $*" | tee -a "$LOG"; tail -n 25 "$LOGS"/*.log 2>/dev/null | tail -n 80; exit 1; }

# The settings both cluster scripts share (GPU defaults, or --local ones); values already set win.
cluster_defaults() {
  if [ "$LOCAL" = 1 ]; then
    BACKEND=cpu; NGPU=0
    : "${TRANSPORT:=ucx}" "${KV_UCX_TRANSPORTS:=tcp}" "${MODEL_PRESET:=tiny}" "${MODEL_ARGS:=--vocab-size 1024}"
    : "${TRANSFER_BLOCKS:=128}" "${MAX_BATCHED_TOKENS:=2048}" "${PREFILL_CHUNK:=512}" "${READY_TIMEOUT:=120}"
  else
    BACKEND=cuda
    NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    export NCCL_NVLS_ENABLE=0
  fi
  : "${TRANSPORT:=cuda_ipc}" "${KV_UCX_TRANSPORTS:=shm}" "${MODEL_PRESET:=llama3-8b}" "${MODEL_ARGS:=}"
  : "${MODEL_DIR:=$WORK/model_$MODEL_PRESET}"
  : "${PREFILL_GPU:=0}" "${DECODE_GPU:=$([ "$NGPU" -ge 2 ] && echo 1 || echo 0)}"
  : "${HOST_KV_BLOCKS:=0}" "${TRANSFER_BLOCKS:=512}" "${BLOCK_SIZE:=16}" "${MAX_BATCHED_TOKENS:=8192}"
  : "${PREFILL_CHUNK:=4096}" "${PREFIX_CACHING:=false}" "${BENCH_VOCAB:=500}" "${READY_TIMEOUT:=300}"
  : "${KV_STAGING:=auto}"
}

# Runs $CLUSTER_REPORT (a function, if set), kills the processes still running (PID), waits for them,
# tars LOGS into $OUT/$CLUSTER_TARBALL.
cluster_finish() {
  local p
  [ -n "${CLUSTER_REPORT:-}" ] && "$CLUSTER_REPORT"
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  mps_stop
  tar -czf "$OUT/$CLUSTER_TARBALL" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null
}
# MPS=1: the nodes' CUDA contexts share the GPU through an MPS server of this script's own (private
# pipe and log folders): kernels of the processes run side by side instead of time-slicing the GPU.
# Stopped on exit; nothing of the GPU's settings changes.
mps_start() {
  [ "${MPS:-0}" = 1 ] || return 0
  command -v nvidia-cuda-mps-control > /dev/null || die "MPS=1 but there is no nvidia-cuda-mps-control"
  export CUDA_MPS_PIPE_DIRECTORY=$WORK/mps/pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps/log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || die "the MPS control daemon did not start"
  MPS_STARTED=1
  step "MPS control daemon started ($CUDA_MPS_PIPE_DIRECTORY)"
}
mps_stop() {
  [ "${MPS_STARTED:-0}" = 1 ] || return 0
  echo quit | nvidia-cuda-mps-control
  MPS_STARTED=0
  cp -r "$CUDA_MPS_LOG_DIRECTORY" "$LOGS/mps" 2>/dev/null
}
cluster_traps() {  # TARBALL [REPORT_FUNCTION]
  CLUSTER_TARBALL=$1
  CLUSTER_REPORT=${2:-}
  trap cluster_finish EXIT
  trap 'exit 143' TERM INT
}

# ROUTER PREFILL DECODE MAKE_MODEL BENCH: from TANDEM_GPU_PREBUILT, from build/ (--local), or built
# into build-gpu with the Debian packages of .deps/debs (tools/gpu/fetch_deps.sh); the targets named
# in CLUSTER_EXTRA_TARGETS (if set) are built after them, a failure logged, not fatal (find_bin them).
cluster_binaries() {
  if [ -n "${TANDEM_GPU_PREBUILT:-}" ]; then
    step "prebuilt binaries from $TANDEM_GPU_PREBUILT"
    use_prebuilt "$TANDEM_GPU_PREBUILT" || die "no prebuilt binaries"
  elif [ "$LOCAL" = 1 ]; then
    B=${TANDEM_BUILD_DIR:-build}
    step "binaries from $B"
  else
    B=build-gpu
    step "unpack .deps/debs"
    use_debs .deps/debs "$PWD/.deps/root" || die "no Debian packages"
    step configure
    cmake -S . -B $B -G Ninja -DTANDEM_CUDA=ON -DCMAKE_BUILD_TYPE=Release "${DEPS_CMAKE_ARGS[@]}" \
      >> "$LOGS/build.log" 2>&1 || die "configure failed (build.log)"
    step build
    ninja -C $B -j"$(nproc)" tandem-router tandem-prefill tandem-decode tandem-make-model tandem-bench-serving \
      >> "$LOGS/build.log" 2>&1 || { grep -E "error" -A3 "$LOGS/build.log" | head -40; die "build failed"; }
    local t
    for t in ${CLUSTER_EXTRA_TARGETS:-}; do  # one by one: a target this build lacks stops only itself
      step "build $t"
      ninja -C $B -j"$(nproc)" "$t" >> "$LOGS/build.log" 2>&1 \
        || echo "$SCRIPT: $t did not build (build.log)" | tee -a "$LOG"
    done
  fi
  ROUTER=$(find_bin tandem-router); PREFILL=$(find_bin tandem-prefill); DECODE=$(find_bin tandem-decode)
  MAKE_MODEL=$(find_bin tandem-make-model); BENCH=$(find_bin tandem-bench-serving)
  local b
  for b in ROUTER PREFILL DECODE MAKE_MODEL BENCH; do [ -x "${!b}" ] || die "no $b binary under $B"; done
  ldd "$DECODE" "$ROUTER" | grep "not found" && die "shared libraries missing (above)"
  return 0
}

# Writes the model MODEL_PRESET into MODEL_DIR unless a whole one is there (kept while the machine
# stays warm; the marker says it was written whole), and names its token ids (cluster_util.py).
cluster_model() {
  if [ ! -f "$MODEL_DIR/.cluster_check_model" ]; then
    step "write model $MODEL_PRESET to $MODEL_DIR"
    rm -rf "$MODEL_DIR"
    "$MAKE_MODEL" --preset "$MODEL_PRESET" $MODEL_ARGS -o "$MODEL_DIR" > "$LOGS/make_model.log" 2>&1 \
      || die "tandem-make-model failed (make_model.log)"
    python3 tools/gpu/cluster_util.py name-ids "$MODEL_DIR" >> "$LOGS/make_model.log" 2>&1 \
      || die "naming the token ids failed"
    touch "$MODEL_DIR/.cluster_check_model"
  fi
  MODEL=cluster-check
  TOKEN=cluster-check-token-$RANDOM$RANDOM
  CONTROL_PORT=$(python3 tools/gpu/cluster_util.py free-port)
  HTTP_PORT=$(python3 tools/gpu/cluster_util.py free-port)
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

start_router() {  # MODE [FLAGS...]: log router_MODE.log (a previous one is kept as router_MODE.<ms>.log), PID[router]
  [ -f "$LOGS/router_$1.log" ] && mv "$LOGS/router_$1.log" "$LOGS/router_$1.$(now_ms).log"
  "$ROUTER" --model-dir "$MODEL_DIR" --served-model-name $MODEL --listen-port "$HTTP_PORT" \
    --control-address "127.0.0.1:$CONTROL_PORT" --cluster-token "$TOKEN" --mode "$1" "${@:2}" \
    > "$LOGS/router_$1.log" 2>&1 &
  PID[router]=$!
  LAUNCHED_MS[router]=$(now_ms)
}

# start_node NAME ROLE GPU KV_BLOCKS: log NAME.log (a previous one is kept as NAME.<ms>.log), PID[NAME].
# ROLE prefill or decode (tandem-prefill, tandem-decode), or colocated (tandem-decode --role colocated:
# it prefills every request placed on it).
start_node() {
  local name=$1 bin=${2^^} role=()
  [ "$2" = colocated ] && bin=DECODE role=(--role colocated)
  [ -f "$LOGS/$name.log" ] && mv "$LOGS/$name.log" "$LOGS/$name.$(now_ms).log"
  LAUNCHED_MS[$name]=$(now_ms)
  "${!bin}" "${role[@]}" --router-address "127.0.0.1:$CONTROL_PORT" --cluster-token "$TOKEN" \
    --node-name "$name" --listen-address 127.0.0.1:0 --http-address 127.0.0.1:0 \
    --transport "$TRANSPORT" --ucx-transports "$KV_UCX_TRANSPORTS" --kv-staging "$KV_STAGING" \
    --transfer-blocks "$TRANSFER_BLOCKS" \
    --model-dir "$MODEL_DIR" --model-name $MODEL --backend $BACKEND --device "$3" \
    --kv-block-size "$BLOCK_SIZE" --kv-num-device-blocks "$4" --kv-num-host-blocks "$HOST_KV_BLOCKS" \
    --kv-enable-prefix-caching "$PREFIX_CACHING" --scheduler-max-num-batched-tokens "$MAX_BATCHED_TOKENS" \
    --scheduler-max-prefill-chunk-tokens "$PREFILL_CHUNK" > "$LOGS/$name.log" 2>&1 &
  PID[$name]=$!
}

# kill_process NAME SIGNAL: signals PID[NAME], waits for it and forgets it.
kill_process() {
  kill -"$2" "${PID[$1]}" 2>/dev/null
  wait "${PID[$1]}" 2>/dev/null
  unset "PID[$1]"
}

http_ok() {  # HOST:PORT PATH -> 0 on HTTP 200 (bash /dev/tcp: no curl needed)
  local fd status
  exec {fd}<>"/dev/tcp/${1%:*}/${1#*:}" 2>/dev/null || return 1
  printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$2" "$1" >&"$fd"
  read -r -t 5 status <&"$fd"
  exec {fd}>&-
  [[ "$status" == "HTTP/1.1 200"* ]]
}
# The HTTP address a node printed once its engine was up (it listens on a free port).
node_http() { grep -m1 -o 'http_address=.*' "$LOGS/$1.log" 2>/dev/null | cut -d= -f2; }

# wait_ready NAME...: polls each process's /health/ready (nodes: ready = registered with the
# router) until all answer 200; READY_MS[name] = launch -> first 200, ms.
wait_ready() {
  local name addr pending=("$@") still
  local until=$(( $(date +%s) + READY_TIMEOUT ))
  while ((${#pending[@]})); do
    still=()
    for name in "${pending[@]}"; do
      kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited while starting ($name.log)"
      if [ "$name" = router ]; then addr=127.0.0.1:$HTTP_PORT; else addr=$(node_http "$name"); fi
      if [ -n "$addr" ] && http_ok "$addr" /health/ready; then
        READY_MS[$name]=$(( $(now_ms) - LAUNCHED_MS[$name] ))
      else
        still+=("$name")
      fi
    done
    pending=("${still[@]}")
    ((${#pending[@]})) || break
    (( $(date +%s) > until )) && die "not ready after $READY_TIMEOUT s: ${pending[*]}"
    sleep 0.1
  done
}
