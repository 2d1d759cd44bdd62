#!/usr/bin/env bash
# Every run calibrates (issue 33): each row decoded twice with `bench`, the first time predicted
# from the probe's figures alone (and calibrating), the second time calibrated; run the script
# again for more passes. The demo model (real) and synthetic TinyLlama-1.1B-shaped F16 and Q8_0
# models (random weights) resident and with about half their weights on the SSD, on the CPU
# device; a bitmap-sparse package of the F16 model (magnitude-pruned to 50 %, bitmap-f16), and the
# real ReLU model relu-stories-2M packaged with row-column bundles and predictors, decoded with the
# neuron cache (bundles from RAM). The profile and its calibration live in OUT_DIR/cache (a fresh
# probe the first time).
# Usage: tests/bench/calibration.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"
export XDG_CACHE_HOME=$out/cache
for type in f16 q8_0; do
  [[ -f $models/tinyllama-1.1b-$type.gguf ]] ||
    "$cli" make-synthetic --preset tinyllama-1.1b --type "$type" -o "$models/tinyllama-1.1b-$type.gguf"
done
sparse=$models/tinyllama-1.1b-f16-bitmap50
[[ -d $sparse ]] || "$cli" compress -m "$models/tinyllama-1.1b-f16.gguf" -o "$sparse" --prune magnitude:0.5 \
  --quant none --no-quality -t 2 >/dev/null
relu=$models/relu-stories-2M-bundles
[[ -d $relu ]] || "$cli" compress -m "$(dirname "$0")/../data/models/relu-stories-2M/model_qint80.bin" \
  --arch relu-llama --prune none --quant none --bundles --predictors 32 -o "$relu" >/dev/null
demo=$(dirname "$0")/../../resources/stories260K.gguf
"$cli" probe >/dev/null
row() {
  local name=$1; shift
  for pass in 1 2; do
    echo "$name | pass $pass | $("$cli" bench "$@" -t 2 --no-baseline 2>/dev/null | grep -E '^  tokens/s  ' | sed 's/^ *//')"
  done
}
row "demo resident" -m "$demo" -n 256 --vram-budget 4GiB
row "F16 resident" -m "$models/tinyllama-1.1b-f16.gguf" -n 16 --vram-budget 8GiB
row "Q8_0 resident" -m "$models/tinyllama-1.1b-q8_0.gguf" -n 16 --vram-budget 8GiB
row "F16 half on SSD" -m "$models/tinyllama-1.1b-f16.gguf" -n 8 --vram-budget 1100MiB --ram-budget 64MiB
row "Q8_0 half on SSD" -m "$models/tinyllama-1.1b-q8_0.gguf" -n 8 --vram-budget 600MiB --ram-budget 64MiB
row "bitmap-sparse resident" -m "$sparse" -n 16 --vram-budget 8GiB
row "bitmap-sparse half on SSD" -m "$sparse" -n 8 --vram-budget 600MiB --ram-budget 64MiB
row "ReLU neuron cache" -m "$relu" -n 64 --vram-budget 3MiB --ram-budget 64MiB --neuron-cache 192 \
  --neuron-mode exact --bundles-from ram
grep -A1 '"suspect"' "$XDG_CACHE_HOME"/spillway/hardware-profile*.json || true
