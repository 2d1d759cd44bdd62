#!/usr/bin/env bash
# Offloaded decode benchmark (issue 3): a synthetic TinyLlama-1.1B-shaped F16 model (random
# weights) with a 1 GiB device budget and 256 MiB of pinned RAM, so that about half the weights
# are read from the SSD every token. Prints the plan, the measured figures against the planner's
# prediction and the probe's SSD bandwidth, and the speed-up over the naive baseline.
# Usage: tests/bench/offload.sh [BUILD_DIR] [OUT_DIR]   (writes OUT_DIR/offload-tinyllama-f16.json)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"
model=$models/tinyllama-1.1b-f16.gguf
[[ -f $model ]] || "$cli" make-synthetic --preset tinyllama-1.1b --type f16 -o "$model"
"$cli" bench -m "$model" -t 2 -n 8 --vram-budget 1GiB --ram-budget 256MiB \
  --json "$out/offload-tinyllama-f16.json" --trace "$out/offload-trace.json"
