#!/usr/bin/env bash
# Every block type side by side on the CPU (issue 50): a synthetic TinyLlama-1.1B-shaped model
# (dim 2048, 22 layers, FFN 5632, vocab 32000; RANDOM weights: random codes in every block, so
# every grid index and sign pattern is read) with every matrix in one TYPE, 2 threads. For each
# type, alternating in one run: llama.cpp's (and ik_llama.cpp's, if IK_LLAMA_BENCH is set)
# `llama-bench -p 512 -n 128`, and `spillway-cli bench` (decode against the memory-bandwidth
# bound measured token by token, and a 512-token prompt), then the peers again.
# Prints a table; Spillway's JSON goes to OUT_DIR/quants-tinyllama-TYPE.json.
# Usage: LLAMA_BENCH=... [IK_LLAMA_BENCH=...] tests/bench/quants_cpu.sh [BUILD_DIR] [OUT_DIR] [TYPES...]
#   (peers built as tests/bench/PEERS.md says; TYPES default: the K and IQ types and F16;
#   SPILLWAY_BENCH_MODELS: where the synthetic models are kept, default BUILD_DIR/bench-models)
set -euo pipefail
build=${1:-build}
out=${2:-$build/bench}
shift $(( $# < 2 ? $# : 2 ))
types=("$@")
(( ${#types[@]} )) || types=(q4_k q5_k q6_k f16 q2_k q3_k iq4_xs iq3_xxs iq2_xxs)
cli=$build/bin/spillway-cli
llama=${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench built from source}
ik=${IK_LLAMA_BENCH:-}
models=${SPILLWAY_BENCH_MODELS:-$build/bench-models}
mkdir -p "$out" "$models"
# pp512 and tg128 tokens/s of one llama-bench run, from its JSON (ik_llama.cpp's CSV has quoted
# fields with commas in them).
peer() {
  "$1" -m "$2" -t 2 -p 512 -n 128 -r 2 -o json 2>/dev/null |
    python3 -c 'import json, sys
runs = json.load(sys.stdin)
pp = next((r["avg_ts"] for r in runs if r.get("n_prompt", 0) > 0), "-")
tg = next((r["avg_ts"] for r in runs if r.get("n_gen", 0) > 0), "-")
print(pp, tg)'
}
echo "| type | Spillway decode tok/s | bandwidth bound (Spillway's share) | llama.cpp tg128 | ik_llama.cpp tg128 | Spillway prompt tok/s | llama.cpp pp512 | ik_llama.cpp pp512 |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for type in "${types[@]}"; do
  model=$models/tinyllama-1.1b-$type.gguf
  [[ -f $model ]] || "$cli" make-synthetic --preset tinyllama-1.1b --type "$type" -o "$model" >&2
  read -r lpp1 ltg1 <<<"$(peer "$llama" "$model")"
  ipp1=- itg1=-
  [[ -n $ik ]] && read -r ipp1 itg1 <<<"$(peer "$ik" "$model")"
  sp=$("$cli" bench -m "$model" --threads 2 -n 32 -r 3 --prompt-tokens 512 --json "$out/quants-tinyllama-$type.json")
  read -r lpp2 ltg2 <<<"$(peer "$llama" "$model")"
  ipp2=- itg2=-
  [[ -n $ik ]] && read -r ipp2 itg2 <<<"$(peer "$ik" "$model")"
  tg=$(awk '/^decode tokens\/s/ {print $3}' <<<"$sp")
  bound=$(awk '/^bandwidth-bound tokens\/s/ {print $3}' <<<"$sp")
  pp=$(awk '/^prompt tokens\/s/ {print $3}' <<<"$sp")
  echo "$(awk -v t="$type" -v tg="$tg" -v b="$bound" -v pp="$pp" -v l1="$ltg1" -v l2="$ltg2" -v i1="$itg1" -v i2="$itg2" \
      -v lp1="$lpp1" -v lp2="$lpp2" -v ip1="$ipp1" -v ip2="$ipp2" 'function avg(a, c) { return (a == "-" || a == "") ? "-" : sprintf("%.2f", (a + c) / 2) }
    BEGIN {printf "| %s | %.2f | %.2f (%.0f%%) | %s | %s | %.1f | %s | %s |", t, tg, b, 100 * tg / b, avg(l1, l2), avg(i1, i2), pp, avg(lp1, lp2), avg(ip1, ip2)}')"
done
