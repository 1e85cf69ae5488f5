#!/usr/bin/env bash
# On the GPU machine: the decode attention kernel and PyTorch SDPA on one shape under
# Nsight Compute (clocks left alone), plus the attention bench with shuffled and in-order
# block tables and SDPA in the same run. Logs under $OUT (one tarball), key lines last.
# Usage (repository root): [SHAPE=B,CTX,HQ,HKV,HD,BS] tools/gpu/attention_profile.sh
# With TANDEM_GPU_PREBUILT=DIR the bench binary is taken from DIR.
set -u
OUT=${OUT:-/tmp/tandem_gpu_out}
L=$(mktemp -d)
B=${TANDEM_GPU_PREBUILT:-build-gpu}
BIN=$(find "$B" -name decode_attention_bench -type f | head -1)
SHAPE=${SHAPE:-64,4096,32,8,128,16}
IFS=, read -r SB SC SQ SK SD SBS <<< "$SHAPE"
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
NCU="ncu --clock-control none $SECTIONS"
"$BIN" --csv "$L/decode.csv" > "$L/bench.log" 2>&1
python3 bench/kernels/sdpa_compare.py "$L/decode.csv" > "$L/sdpa.log" 2>&1
"$BIN" --in-order --shape 64,4096,32,8,128,16 --shape 256,4096,32,8,128,16 --shape 8,32768,32,8,128,16 > "$L/in_order.log" 2>&1
$NCU --kernel-name regex:'^DecodeAttentionKernel' --launch-skip 2 --launch-count 1 \
  "$BIN" --shape "$SHAPE" --reps 2 > "$L/ncu_ours.log" 2>&1
$NCU --profile-from-start off python3 bench/kernels/sdpa_profile.py "$SB" "$SC" "$SQ" "$SK" "$SD" > "$L/ncu_sdpa.log" 2>&1
tar -C "$L" -czf "$OUT/attention_profile.tgz" .
KEYS='DecodeAttention|void |Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Shared Memory Config|Dynamic Shared|Block Size|Grid Size|Theoretical Occ|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth|torch'
for f in ncu_ours ncu_sdpa; do echo "---- $f"; grep -E "$KEYS" "$L/$f.log" | head -40; done
echo "---- in order"; tail -5 "$L/in_order.log"
echo "---- bench"; sed -n '/^batch/,/^$/p' "$L/bench.log" | head -24
echo "---- sdpa"; tail -16 "$L/sdpa.log"
