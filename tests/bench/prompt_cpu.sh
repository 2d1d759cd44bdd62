#!/usr/bin/env bash
# CPU prompt processing beside llama.cpp (issue 28): synthetic TinyLlama-1.1B-shaped models (dim
# 2048, 22 layers, FFN 5632, vocab 32000; random weights) in each TYPE, a 512-token prompt, 2
# threads. For each type, alternating in one run: llama.cpp's `llama-bench -p 512 -n 0` and
# `spillway-cli bench --prompt-tokens 512` (which also prints the arithmetic bound: the model's
# flops per token at the rate this machine's float matrix products reach, measured in the run).
# Prints a table: tokens/s of both, their ratio, Spillway's share of the arithmetic bound; the
# bench JSON goes to OUT_DIR/prompt-tinyllama-TYPE.json.
# Usage: LLAMA_BENCH=/path/to/llama-bench tests/bench/prompt_cpu.sh [BUILD_DIR] [OUT_DIR] [TYPES...]
#   (llama.cpp built from source as tests/bench/PEERS.md says; TYPES default: q8_0 f16 q4_0 q4_k;
#   SPILLWAY_BENCH_MODELS: where the synthetic models are kept, default BUILD_DIR/bench-models)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
shift $(( $# < 2 ? $# : 2 ))
types=("$@")
(( ${#types[@]} )) || types=(q8_0 f16 q4_0 q4_k)
cli=$build/bin/spillway-cli
llama=${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench built from source}
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"
rows=()
for type in "${types[@]}"; do
  model=$models/tinyllama-1.1b-$type.gguf
  [[ -f $model ]] || "$cli" make-synthetic --preset tinyllama-1.1b --type "$type" -o "$model" >&2
  # llama.cpp first, then Spillway, then llama.cpp again: the two peers' figures frame ours.
  ll1=$("$llama" -m "$model" -t 2 -p 512 -n 0 -r 3 -o csv 2>/dev/null | awk -F, 'NR>1 {gsub(/"/,""); v=$(NF-1)} END {print v}')
  sp=$("$cli" bench -m "$model" --threads 2 -n 1 -r 2 --prompt-tokens 512 --json "$out/prompt-tinyllama-$type.json")
  ll2=$("$llama" -m "$model" -t 2 -p 512 -n 0 -r 3 -o csv 2>/dev/null | awk -F, 'NR>1 {gsub(/"/,""); v=$(NF-1)} END {print v}')
  ours=$(awk '/^prompt tokens\/s/ {print $3}' <<<"$sp")
  bound=$(awk '/^prompt arithmetic bound/ {print $4}' <<<"$sp")
  peer=$(awk -v a="$ll1" -v b="$ll2" 'BEGIN {printf "%.2f", (a + b) / 2}')
  rows+=("$(awk -v t="$type" -v o="$ours" -v p="$peer" -v a="$ll1" -v b="$ll2" -v bd="$bound" \
    'BEGIN {printf "| %s | %.2f | %.2f (%.2f, %.2f) | %.2f | %.0f%% |", t, o, p, a, b, o / p, 100 * o / bd}')")
done
echo "| type | Spillway prompt tokens/s | llama.cpp pp512 tokens/s (before, after) | ratio | Spillway / arithmetic bound |"
echo "| --- | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
