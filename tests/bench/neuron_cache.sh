#!/usr/bin/env bash
# Neuron-cache benchmark (issue 9): the activation-sparse FFN against dense offloading at the
# same device budget, on
#   1. the real relu-stories-2M (tests/data/models), packaged with row-column bundles and rank-32
#      predictors, bundles from RAM, exact and predicted modes;
#   2. a synthetic OPT-6.7B-shaped ReLU model (real shapes, 8 of its 32 layers, RANDOM weights)
#      whose per-layer FFN density follows the one measured on relu-stories-2M, packaged with
#      bundles and rank-64 predictors, bundles read from the SSD.
# Prints bytes moved per token (SSD reads, host->device copies and bundle loads), tokens/s, the
# cache's hit rate, the dense run's figures and (predicted mode) the quality against the dense
# model; JSON per run in OUT_DIR.
# Usage: tests/bench/neuron_cache.sh [BUILD_DIR] [OUT_DIR]  (needs ~10 GB free in the models dir;
# the OPT package's predictor training takes ~11 minutes on 2 cores)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
data=$(cd "$(dirname "$0")/../data" && pwd)
mkdir -p "$out" "$models"

relu=$models/relu-stories-2M-bundles
if [[ ! -d $relu ]]; then
  "$cli" compress -m "$data/models/relu-stories-2M/model_qint80.bin" --arch relu-llama \
    --prune none --quant none --bundles --predictors 32 -o "$relu"
fi
for mode in exact predicted; do
  "$cli" bench -m "$relu" -t 2 -n 64 --vram-budget 2304KiB --ram-budget 64MiB --neuron-cache 192 \
    --neuron-mode $mode --bundles-from ram --quality --json "$out/neuron-cache-relu-stories-2M-$mode.json"
done

"$cli" sparsity -m "$data/models/relu-stories-2M/model_qint80.bin" --arch relu-llama --continue 64 \
  --json "$models/relu-stories-2M-sparsity.json" > /dev/null
opt=$models/opt-6.7b-8layers-f16.gguf
[[ -f $opt ]] || "$cli" make-synthetic --preset opt-6.7b --type f16 --layers 8 --align 4096 \
  --ffn-density-from "$models/relu-stories-2M-sparsity.json" -o "$opt"
optpkg=$models/opt-6.7b-8layers-bundles
[[ -d $optpkg ]] || "$cli" compress -m "$opt" --prune none --quant none --bundles --predictors 64 \
  --no-quality -o "$optpkg"
for cache in 4096 8192; do
  quality=""
  [[ $cache == 8192 ]] && quality=--quality
  "$cli" bench -m "$optpkg" -t 2 -n 8 --vram-budget 2560MiB --ram-budget 256MiB --neuron-cache $cache \
    --neuron-mode predicted --bundles-from ssd $quality --json "$out/neuron-cache-opt-6.7b-predicted-$cache.json"
done
"$cli" bench -m "$optpkg" -t 2 -n 8 --vram-budget 2560MiB --ram-budget 256MiB --neuron-cache 8192 \
  --neuron-mode exact --bundles-from ssd --json "$out/neuron-cache-opt-6.7b-exact-8192.json"
