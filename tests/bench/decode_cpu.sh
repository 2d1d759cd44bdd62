#!/usr/bin/env bash
# CPU decode benchmark (issue 2): a synthetic TinyLlama-1.1B-shaped model (dim 2048, 22 layers,
# 32 heads, 4 KV heads, FFN 5632, vocab 32000; random weights) in Q8_0 and F16, decoded at
# batch 1 with 2 threads, against the bandwidth bound measured on the same machine: every token
# is compared with a plain read of the same weights timed right after it (spillway-cli bench).
# Then a 64-token prompt, as one batched pass (batches of 32) and as one token per pass.
# Usage: tests/bench/decode_cpu.sh [BUILD_DIR] [OUT_DIR]   (writes OUT_DIR/decode-*.json)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
cli=$build/bin/spillway-cli
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"
for type in q8_0 f16; do
  model=$models/tinyllama-1.1b-$type.gguf
  [[ -f $model ]] || "$cli" make-synthetic --preset tinyllama-1.1b --type "$type" -o "$model"
  echo "== synthetic TinyLlama-1.1B ($type, random weights), 2 threads"
  "$cli" bench -m "$model" --threads 2 -n 32 -r 5 --json "$out/decode-tinyllama-$type.json"
  echo
done
