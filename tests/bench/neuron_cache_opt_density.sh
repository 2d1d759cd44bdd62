#!/usr/bin/env bash
# Neuron cache at the real model's density (issue 9): a synthetic OPT-6.7B-shaped ReLU model (real
# shapes, 8 of its 32 layers, RANDOM weights) whose FFNs let 3% of their neurons through per token
# (LLM in a flash §3.1: OPT 6.7B's FFN is 97% sparse), with hot and cold neurons (spread 1),
# packaged with bundles and rank-64 predictors of the attention's input (Deja Vu, Tricksy), so the
# missing bundles are read from the SSD while attention runs. Compared by `bench` with dense
# offloading at the same budgets; predicted mode, with its quality against the dense model; cold
# neurons shipped, computed on the CPU, or as the cost model picks.
# Usage: tests/bench/neuron_cache_opt_density.sh [BUILD_DIR] [OUT_DIR]  (~8 GB in the models dir;
# the package with its predictors takes ~3 minutes on 2 cores)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"

opt=$models/opt-6.7b-8layers-f16-d3.gguf
[[ -f $opt ]] || "$cli" make-synthetic --preset opt-6.7b --type f16 --layers 8 --align 4096 \
  --ffn-density 0.03 -o "$opt"
pkg=$models/opt-6.7b-8layers-d3-attention
# (packages from before the activity frequencies were recorded are made again)
[[ -d $pkg ]] && ! "$cli" info -m "$pkg" | grep -q ffn_activity && rm -rf "$pkg"
[[ -d $pkg ]] || "$cli" compress -m "$opt" --prune none --quant none --bundles --predictors 64 \
  --predictor-input attention --no-quality -o "$pkg"
for cache in 1024 2048; do
  quality=""
  [[ $cache == 2048 ]] && quality=--quality
  "$cli" bench -m "$pkg" -t 2 -n 8 --vram-budget 2560MiB --ram-budget 256MiB --neuron-cache $cache \
    --neuron-mode predicted --bundles-from ssd $quality --json "$out/neuron-cache-opt-6.7b-d3-predicted-$cache.json"
done
"$cli" bench -m "$pkg" -t 2 -n 8 --vram-budget 2560MiB --ram-budget 256MiB --neuron-cache 2048 \
  --neuron-mode exact --bundles-from ssd --json "$out/neuron-cache-opt-6.7b-d3-exact-2048.json"
# Hot and cold neurons: each layer's cold neurons always shipped, or always computed where they lie
# (the runs above let the cost model choose).
for cold in ship cpu; do
  "$cli" bench -m "$pkg" -t 2 -n 8 --vram-budget 2560MiB --ram-budget 256MiB --neuron-cache 2048 \
    --neuron-mode predicted --bundles-from ssd --cold-neurons $cold \
    --json "$out/neuron-cache-opt-6.7b-d3-predicted-2048-$cold.json"
done
