#!/usr/bin/env bash
# The README's main job: installs what is needed, builds, writes the built-in tiny
# model (random weights, byte-level tokenizer) and runs generation on it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
MODEL_DIR="$BUILD_DIR/models/tiny"
[ -f "$MODEL_DIR/config.json" ] || "$BUILD_DIR/tools/make_model/tandem-make-model" --preset tiny -o "$MODEL_DIR"
"$BUILD_DIR/tools/generate/tandem-generate" --model-dir "$MODEL_DIR" --chat --max-tokens 40 \
  --prompt "Write a haiku about disaggregated serving."
